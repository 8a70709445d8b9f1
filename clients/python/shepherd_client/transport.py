"""One HTTP POST of a batch of reports. Never raises; returns what the caller should do next."""

import dataclasses
import json
import math
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


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an error, not followed: urllib would resend the POST as a GET without its body (the
    reports lost, the answer 200 "ok") and carry the rank's token to wherever it points."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D102 - urllib's hook
        return None


# Straight to SHEPHERD_URL: no redirects, and no http_proxy/https_proxy from the environment (a site's
# download proxy must neither carry rank credentials nor decide whether the ranks look alive).
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


def reports_url(base_url: str, job: str, slurm_job_id: str = "") -> str:
    """The job's reports route; without a job, the route that binds to the job by its SLURM_JOB_ID."""
    if not job and slurm_job_id:
        return "%s/v1/external/slurm/%s/reports" % (base_url.rstrip("/"), urllib.parse.quote(slurm_job_id, safe=""))
    return "%s/v1/jobs/%s/reports" % (base_url.rstrip("/"), urllib.parse.quote(job, safe=""))


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
    """`envelope`: other top-level fields of the body (the Slurm job's size and name on the binding route)."""
    try:
        body = json.dumps(dict(envelope or {}, reports=reports), allow_nan=False, separators=(",", ":")).encode()
    except (TypeError, ValueError) as e:  # a caller passed something JSON cannot carry: never retry it
        return PostResult(False, False, "cannot encode reports: %s" % e)
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with _OPENER.open(req, timeout=timeout_s) as resp:
            try:
                raw = read_bounded(resp, deadline_s=max(timeout_s, 1.0))
            except AnswerTooLarge as e:
                # The batch was answered 2xx, so it is not sent again; only the answer is dropped.
                return PostResult(False, False, "HTTP %d: %s" % (resp.status, e))
            rejected = None
            try:
                answer = json.loads(raw.decode() or "{}")
                if isinstance(answer, dict) and answer.get("rejected"):
                    rejected = answer["rejected"]
            except ValueError:
                pass
            return PostResult(True, False, "HTTP %d" % resp.status, rejected=rejected)
    except urllib.error.HTTPError as e:
        try:
            detail = e.read(2048).decode(errors="replace")
        except Exception:  # noqa: BLE001 - the body of an error answer is best effort
            detail = ""
        transient = e.code in (408, 429) or e.code >= 500
        if 300 <= e.code < 400:
            detail = "redirected to %s: not followed; set SHEPHERD_URL to the daemon's own address" % (
                e.headers.get("Location", "?"))
        return PostResult(False, transient, "HTTP %d %s" % (e.code, detail.strip()[:300]),
                          retry_after_s=_retry_after(e.headers) if transient else None)
    except Exception as e:  # noqa: BLE001 - URLError, timeouts, resets: all transient, never raised
        return PostResult(False, True, "%s: %s" % (type(e).__name__, e))
