"""Delivery of a batch of reports: one HTTP POST, or, for a rank an agent started, a file its agent relays
(deliver). Never raises; returns what the caller should do next."""

import dataclasses
import json
import math
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Optional


@dataclasses.dataclass
class PostResult:
    ok: bool  # the daemon accepted the batch (individual reports may still be rejected)
    retry: bool  # a transient failure: keep the batch and send it again later
    detail: str = ""
    retry_after_s: Optional[float] = None  # from a 429/503 Retry-After header
    rejected: Optional[list] = None  # [{"index", "error"}] from a 202 answer
    status: int = 0  # the HTTP status of the answer; 0: none came


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """urllib never follows a redirect itself: it would resend a POST as a GET without its body (the reports
    lost, the answer 200 "ok"). post_reports follows 307/308 itself, with the POST and its body."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D102 - urllib's hook
        return None


# Straight to SHEPHERD_URL: no http_proxy/https_proxy from the environment (a site's download proxy must
# neither carry rank credentials nor decide whether the ranks look alive).
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())

# Redirects followed per request (a follower names the leader; more means replicas disagree: a loop).
MAX_REDIRECTS = 2

# The URL that last answered, per target list (post_reports' `url`): where the next POST goes first.
_answered_by: Dict[str, str] = {}
_answered_lock = threading.Lock()


def split_urls(url_list: str) -> List[str]:
    """SHEPHERD_URL's replicas: "url1,url2,..." with spaces and trailing "/" dropped, empty and repeated
    entries skipped, in order. One URL is a list of one."""
    out: List[str] = []
    for u in (url_list or "").split(","):
        u = u.strip().rstrip("/")
        if u and u not in out:
            out.append(u)
    return out


def reports_url(base_url: str, job: str, slurm_job_id: str = "") -> str:
    """The job's reports route; without a job, the route that binds to the job by its SLURM_JOB_ID.
    `base_url` may list several replicas (comma-separated): the answer lists the route on each of them."""
    if not job and slurm_job_id:
        path = "/v1/external/slurm/%s/reports" % urllib.parse.quote(slurm_job_id, safe="")
    else:
        path = "/v1/jobs/%s/reports" % urllib.parse.quote(job, safe="")
    return ",".join(u + path for u in split_urls(base_url))


# The most of an answer the client reads: the daemon's answers to report batches are a few KiB; anything
# beyond this (a misbehaving server, or SHEPHERD_URL pointing elsewhere) is refused, not buffered.
MAX_ANSWER_BYTES = 16 << 20


class AnswerTooLarge(Exception):
    pass


def read_bounded(resp, limit: int = MAX_ANSWER_BYTES, deadline_s: Optional[float] = None) -> bytes:
    """At most `limit` bytes of `resp`'s body, read in chunks; AnswerTooLarge beyond that, or when reading
    takes past `deadline_s` seconds in all (a server that dribbles its answer)."""
    length = resp.headers.get("Content-Length") if getattr(resp, "headers", None) is not None else None
    try:
        if length is not None and int(length) > limit:
            raise AnswerTooLarge("answer of %s bytes is over the client's %d-byte limit" % (length, limit))
    except ValueError:
        pass
    until = None if deadline_s is None else time.monotonic() + deadline_s
    chunks, total = [], 0
    while True:
        chunk = resp.read(min(65536, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise AnswerTooLarge("answer over the client's %d-byte limit: not read" % limit)
        if until is not None and time.monotonic() > until:
            raise AnswerTooLarge("answer not read within %.1f s" % deadline_s)


def _retry_after(headers) -> Optional[float]:
    try:
        v = float(headers.get("Retry-After", ""))
        return v if math.isfinite(v) and v >= 0 else None
    except (TypeError, ValueError):
        return None


def post_reports(url: str, reports: List[dict], token: str = "", timeout_s: float = 2.0,
                 envelope: Optional[Dict[str, Any]] = None) -> PostResult:
    """POST `reports` to `url`, a comma-separated list of the same route on each replica (reports_url).
    `envelope`: other top-level fields of the body (the Slurm job's size and name on the binding route).

    Within `timeout_s` in all: first the URL that last answered for this `url`, then the others in order,
    each at most once. A refused or timed-out connection and a 503 (a replica that knows no leader, or one
    shutting down) move on to the next; a 307/308 is followed (POST and body resent) to an absolute http(s)
    Location, at most MAX_REDIRECTS hops, and the URL that answered is remembered. Any other answer ends
    the request. Nothing answering, a redirect loop or every replica answering 503 is transient: the
    caller keeps the batch and sends it again."""
    try:
        body = json.dumps(dict(envelope or {}, reports=reports), allow_nan=False, separators=(",", ":")).encode()
    except (TypeError, ValueError) as e:  # a caller passed something JSON cannot carry: never retry it
        return PostResult(False, False, "cannot encode reports: %s" % e)
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    candidates = split_urls(url)
    if not candidates:
        return PostResult(False, False, "no daemon URL")
    with _answered_lock:
        first = _answered_by.get(url)
    if first is None:
        order = candidates
    else:
        after = candidates.index(first) + 1 if first in candidates else 0
        order = [first] + [c for c in candidates[after:] + candidates[:after] if c != first]
    deadline = time.monotonic() + timeout_s
    hops = 0
    tried: List[str] = []
    failures: List[str] = []
    last_failure: Optional[PostResult] = None
    last_503: Optional[PostResult] = None
    for start in order:
        if start in tried:
            continue
        if time.monotonic() >= deadline:
            failures.append("no time left within %.1f s for %s" % (timeout_s, ", ".join(
                c for c in order if c not in tried)))
            break
        target, chain = start, [start]
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                failures.append("%s: no time left within %.1f s" % (target, timeout_s))
                break
            tried.append(target)
            res, location, answered = _post_once(target, body, headers, left)
            if res is not None and (not answered or res.status == 503):  # the next replica
                last_failure = res
                if res.status == 503:
                    last_503 = res
                failures.append("%s: %s" % (target, res.detail[:160]))
                break
            if res is not None:  # an answer, good or bad: this replica speaks for the leader
                with _answered_lock:
                    _answered_by[url] = target
                return res
            chain.append(location)
            if not location.startswith(("http://", "https://")):
                last_failure = None
                failures.append("%s: redirected to %r, not an absolute http URL" % (target, location[:200]))
                break
            if hops >= MAX_REDIRECTS:
                return PostResult(False, True, "more than %d redirects (a redirect loop?): %s" % (
                    MAX_REDIRECTS, " -> ".join(chain)))
            hops += 1
            target = location
    # Nothing answered: the next POST starts with the replica after the one that was first.
    with _answered_lock:
        nxt = [c for c in order[1:] if c in candidates] or candidates
        _answered_by[url] = nxt[0]
    if len(failures) == 1 and last_failure is not None:
        return last_failure  # one replica: its own failure, as it was
    return PostResult(False, True, "no daemon answered: " + "; ".join(failures),
                      retry_after_s=last_503.retry_after_s if last_503 else None)


def _post_once(url: str, body: bytes, headers: Dict[str, str], timeout_s: float):
    """One POST to one URL: (its PostResult, None, answered), or (None, Location, True) for a 307/308.
    `answered` is False when no HTTP answer came (refused, reset, timed out)."""
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with _OPENER.open(req, timeout=timeout_s) as resp:
            try:
                raw = read_bounded(resp, deadline_s=max(timeout_s, 1.0))
            except AnswerTooLarge as e:
                # The batch was answered 2xx, so it is not sent again; only the answer is dropped.
                return PostResult(False, False, "HTTP %d: %s" % (resp.status, e), status=resp.status), None, True
            rejected = None
            try:
                answer = json.loads(raw.decode() or "{}")
                if isinstance(answer, dict) and answer.get("rejected"):
                    rejected = answer["rejected"]
            except ValueError:
                pass
            return PostResult(True, False, "HTTP %d" % resp.status, rejected=rejected, status=resp.status), None, True
    except urllib.error.HTTPError as e:
        if e.code in (307, 308):
            return None, (e.headers.get("Location") or "").strip(), True
        try:
            detail = e.read(2048).decode(errors="replace")
        except Exception:  # noqa: BLE001 - the body of an error answer is best effort
            detail = ""
        transient = e.code in (408, 429) or e.code >= 500
        if 300 <= e.code < 400:
            detail = "redirected to %s: not followed (only 307/308 keep the POST); set SHEPHERD_URL to the " \
                     "daemon's own address" % (e.headers.get("Location", "?"))
        return PostResult(False, transient, "HTTP %d %s" % (e.code, detail.strip()[:300]),
                          retry_after_s=_retry_after(e.headers) if transient else None, status=e.code), None, True
    except Exception as e:  # noqa: BLE001 - URLError, timeouts, resets: all transient, never raised
        return PostResult(False, True, "%s: %s" % (type(e).__name__, e)), None, False


# --- Relayed delivery (docs/agent-protocol.md, "Relayed reports") ----------------------------------------
# A rank its node's agent started has SHEPHERD_RELAY_DIR set: it posts nothing itself. Each batch becomes a
# file `<unix-ms, 13 digits>-<counter, 6 digits>.json` holding {"reports": [...]} (written under a name the
# agent ignores, then linked to its final name, so the agent never reads half a batch), and the agent's next
# heartbeat carries it: one request per node and interval, however many ranks the node runs.

RELAY_ENV = "SHEPHERD_RELAY_DIR"
RELAY_MAX_PENDING = 64  # batch files waiting for the agent; beyond, batches stay in the sender's buffer
RELAY_MAX_REPORTS = 256  # per file (what the agent relays per rank and heartbeat)
RELAY_MAX_BYTES = 256 << 10  # per file, likewise

_relay_lock = threading.Lock()
_relay_state = {"counter": 0, "last_ms": 0}


def _is_relay_name(name: str) -> bool:
    return (len(name) == 25 and name[13] == "-" and name.endswith(".json") and name[:13].isdigit()
            and name[14:20].isdigit())


def relay_pending(directory: str) -> int:
    """Batch files in `directory` the agent has not taken yet."""
    return sum(1 for n in os.listdir(directory) if _is_relay_name(n))


def _relay_chunks(reports: List[dict]):
    """`reports` as encoded file bodies of at most RELAY_MAX_REPORTS reports and RELAY_MAX_BYTES bytes each,
    in order, and the indexes of reports too large for a file of their own."""
    bodies: List[bytes] = []
    too_large: List[int] = []

    def add(lo: int, hi: int) -> None:
        body = json.dumps({"reports": reports[lo:hi]}, allow_nan=False, separators=(",", ":")).encode()
        if len(body) <= RELAY_MAX_BYTES:
            bodies.append(body)
        elif hi - lo == 1:
            too_large.append(lo)
        else:
            mid = (lo + hi) // 2
            add(lo, mid)
            add(mid, hi)

    for lo in range(0, len(reports), RELAY_MAX_REPORTS):
        add(lo, min(lo + RELAY_MAX_REPORTS, len(reports)))
    return bodies, too_large


def _next_relay_name() -> str:
    with _relay_lock:
        # Never backwards (a clock step would put a batch before older ones), unique within the process.
        ms = max(int(time.time() * 1000), _relay_state["last_ms"])
        _relay_state["last_ms"] = ms
        _relay_state["counter"] = (_relay_state["counter"] + 1) % 1000000
        return "%013d-%06d.json" % (ms, _relay_state["counter"])


def write_relay(directory: str, reports: List[dict]) -> PostResult:
    """Writes `reports` into the relay directory as one or more batch files, in order. Transient failure
    (retry) when RELAY_MAX_PENDING files already wait or the directory cannot be written: the caller keeps
    the batch, as when the daemon is unreachable."""
    try:
        bodies, too_large = _relay_chunks(reports)
    except (TypeError, ValueError) as e:  # a caller passed something JSON cannot carry: never retry it
        return PostResult(False, False, "cannot encode reports: %s" % e)
    try:
        pending = relay_pending(directory)
        if pending + len(bodies) > RELAY_MAX_PENDING:
            return PostResult(False, True, "%d report files wait in %s for the node's agent" % (pending, directory))
        tmps = []
        try:
            for body in bodies:  # every file first, then the names: a failure publishes nothing
                tmp = os.path.join(directory, ".%d-%d-%d.tmp" % (os.getpid(), threading.get_ident(), len(tmps)))
                with open(tmp, "wb") as f:
                    f.write(body)
                tmps.append(tmp)
            for tmp in tmps:
                # link, not rename: another process of the rank (its heartbeat helper) may pick the same
                # name; link never replaces a file.
                for _ in range(100):
                    try:
                        os.link(tmp, os.path.join(directory, _next_relay_name()))
                        break
                    except FileExistsError:
                        continue
                else:
                    raise OSError("no free batch file name in %s" % directory)
        finally:
            for tmp in tmps:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
    except OSError as e:
        return PostResult(False, True, "cannot write reports into %s: %s" % (directory, e))
    rejected = [{"index": i, "error": "larger than %d bytes: not relayed" % RELAY_MAX_BYTES} for i in too_large]
    return PostResult(True, False, "written for the agent", rejected=rejected or None)


def deliver(url: str, reports: List[dict], token: str = "", timeout_s: float = 2.0,
            envelope: Optional[Dict[str, Any]] = None) -> PostResult:
    """post_reports, or write_relay when SHEPHERD_RELAY_DIR is set (the rank's agent relays its reports;
    `url`, `token` and `envelope` are then unused)."""
    directory = os.environ.get(RELAY_ENV, "")
    if directory:
        return write_relay(directory, reports)
    return post_reports(url, reports, token=token, timeout_s=timeout_s, envelope=envelope)
