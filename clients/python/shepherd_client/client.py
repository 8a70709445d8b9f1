"""ShepherdClient: what a training rank calls to tell shepherdd how it is doing.

Thread-safety: every method may be called from any thread; state changes and the reports describing
them are ordered under one lock shared with the heartbeat thread. No method raises on network trouble;
reports that cannot be delivered are retried from a bounded buffer and eventually dropped (logged).

Traffic: reports are buffered and posted together with the heartbeat, once per heartbeat interval
(SHEPHERD_HEARTBEAT_INTERVAL, default 1 s), in one POST. Checkpoint reports and non-finite losses wake
the thread at once. In the default mode (SHEPHERD_COLLECTIVE_REPORTS=summary) collectives send nothing of
their own: the heartbeat is a `summary` that says, per process group, the last completed seq, the oldest
open collective and the collectives completed since the previous summary with their summed wait
(summary.py), so a rank's traffic does not grow with the collectives its steps run.
SHEPHERD_COLLECTIVE_REPORTS=all (for debugging) sends collective reports: a collective that starts and
completes between two posts is sent as its `completed` report only (the `started` one is withdrawn, since
`completed` alone tells the daemon the rank entered and left that seq); one still open at post time is sent
as `started`, and every heartbeat repeats it (`collective: {seq, op, group, since}`) for as long as it stays
open. `completed|none` send fewer collective reports still.

Child processes (lineage.py): from_env() in a child of an instrumented rank returns a disabled client, and a
forked child's copy of an enabled client is disabled at the fork (no reports, no progress-page writes, no
flush at its exit), so no child ever reports as the rank.
"""

import atexit
import contextlib
import json
import logging
import math
import os
import threading
import time
import weakref
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

from . import config as _config
from . import lineage
from .hashing import param_digest
from .sender import Entry, ReportSender
from .markers import MARKER_SUFFIX, checkpoint_owner, checkpoint_refusal, write_checkpoint_marker  # noqa: F401
from .summary import GroupTable

log = logging.getLogger("shepherd_client")

PHASES = ("train", "checkpoint_save", "checkpoint_load", "eval")
MEMBERS_EVERY_S = 30.0  # a named group's members ride on one of its reports at most this often
# The liveness helper sends a summary itself once the rank's own thread has delivered none for this many
# heartbeat intervals (helper.py).
HELPER_AFTER_INTERVALS = 1.5


def encode_metric(x: Any) -> Any:
    """A float for JSON: finite numbers as they are, NaN/Inf as "nan", "inf", "-inf"; None stays None.
    Accepts anything float() takes, including a one-element torch tensor."""
    if x is None:
        return None
    try:
        v = float(x.item() if hasattr(x, "item") else x)
    except (TypeError, ValueError):
        return None
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


class _OpenCollective:
    """An open collective: the token collective_begin() returns and collective_end() takes."""

    __slots__ = ("seq", "op", "group", "since", "started", "nbytes", "members")

    def __init__(self, seq: int, op: str, group: str, since: float, nbytes: Optional[int] = None,
                 members: Optional[List[int]] = None):
        self.seq, self.op, self.group, self.since, self.nbytes = seq, op, group, since, nbytes
        self.members = members
        self.started: Optional[Entry] = None  # the buffered `started` report, withdrawn if still unsent


class ShepherdClient:
    """Construct with `ShepherdClient.from_env()`. A client without a URL is disabled: every method
    works and returns what it would, but nothing is sent and no thread runs."""

    def __init__(self, cfg: Optional[_config.ClientConfig] = None, *, start: bool = True, **overrides: Any):
        cfg = cfg or _config.ClientConfig()
        for k, v in overrides.items():
            if not hasattr(cfg, k):
                raise TypeError("unknown ShepherdClient option %r" % k)
            setattr(cfg, k, v)
        self.config = cfg
        self._lock = threading.Lock()
        self._step: Optional[int] = None
        self._phase = "train"
        self._open: List[_OpenCollective] = []  # innermost last
        self._seq: Dict[str, int] = {}
        self._members_sent: Dict[str, float] = {}  # group -> when a report last carried its members
        self._groups = GroupTable()  # summary mode: per-group progress since the last summary
        # summary mode: when this process's own thread last delivered its summaries (published on the
        # progress page for the helper), and the sender's failure count as of the last summary.
        self._delivered_at = time.time()
        self._failed_posts_seen = 0
        self._last_summary: Optional[Dict[str, Any]] = None  # the latest periodic summary
        self._closed = False
        self._step_since = time.time()
        self._page: Any = None  # a ProgressPage once start_helper() succeeded
        self._helper: Any = None  # its subprocess.Popen
        self._inherited: Any = None  # in a forked child: the rank's sender, page and helper (never used)
        self._sender: Optional[ReportSender] = None
        if cfg.enabled:
            from .transport import reports_url

            self._sender = ReportSender(
                reports_url(cfg.url, cfg.job, cfg.slurm_job_id), token=cfg.token, timeout_s=cfg.timeout_s,
                interval_s=cfg.heartbeat_interval_s, max_buffer=cfg.max_buffer, max_batch=cfg.max_batch,
                make_heartbeat=self._periodic_heartbeat_locked, lock=self._lock, envelope=cfg.envelope())
            if start:
                self._sender.start()
            atexit.register(self._close_at_exit)  # deliver what is buffered when a script forgets close()
            _enabled_clients.add(self)

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None, *, start: bool = True,
                 **overrides: Any) -> "ShepherdClient":
        """Read SHEPHERD_URL, SHEPHERD_JOB, SHEPHERD_ATTEMPT, SHEPHERD_RANK_COORDS,
        SHEPHERD_RESUME_CHECKPOINT, SHEPHERD_TOKEN, RANK, WORLD_SIZE (and SHEPHERD_HEARTBEAT_INTERVAL,
        SHEPHERD_HTTP_TIMEOUT, SHEPHERD_COLLECTIVE_REPORTS). Disabled when SHEPHERD_URL is unset, and in a
        child process of an instrumented rank (lineage.inherited_from_rank: it would report as the rank).
        Keyword overrides replace individual ClientConfig fields."""
        cfg = _config.config_from_env(environ)
        if cfg.enabled and lineage.inherited_from_rank(environ):
            log.debug("shepherd: a child process of rank %d's process: this client stays disabled", cfg.rank)
            cfg.url = None
        return cls(cfg, start=start, **overrides)

    # --- identity ---------------------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        return self._sender is not None

    @property
    def rank(self) -> int:
        return self.config.rank

    @property
    def world_size(self) -> int:
        return self.config.world_size

    @property
    def attempt(self) -> int:
        return self.config.attempt

    @property
    def job(self) -> str:
        return self.config.job

    @property
    def coords(self) -> Optional[Tuple[int, ...]]:
        """(tp, pp, dp) or (tp, pp, dp, cp) from SHEPHERD_RANK_COORDS, or None."""
        return self.config.coords

    @property
    def resume_checkpoint(self) -> Optional[str]:
        """The checkpoint path to resume from (SHEPHERD_RESUME_CHECKPOINT), or None for a fresh start."""
        return self.config.resume_checkpoint

    @property
    def current_step(self) -> Optional[int]:
        return self._step

    @property
    def phase(self) -> str:
        return self._phase

    @property
    def stats(self) -> Dict[str, int]:
        return dict(self._sender.stats) if self._sender else {}

    # --- reports ----------------------------------------------------------------------------------

    def _base(self, kind: str) -> Dict[str, Any]:
        r = {"rank": self.config.rank, "attempt": self.config.attempt, "time": time.time(), "kind": kind}
        if self.config.node:
            r["node"] = self.config.node
        return r

    def _emit_locked(self, report: Dict[str, Any], urgent: bool = False) -> Optional[Entry]:
        if self._sender is None or self._closed:
            return None
        return self._sender.enqueue_locked(report, urgent=urgent)

    @property
    def summary_mode(self) -> bool:
        return self.config.collective_reports == "summary"

    def _periodic_heartbeat_locked(self) -> Optional[Dict[str, Any]]:
        if self.summary_mode:
            # The sender's thread runs this once per interval. Its posts are not failing: what it hands over
            # reaches the daemon, so the helper (when there is one) stays quiet.
            failed = self._sender.stats.get("failed_posts", 0) if self._sender is not None else 0
            if failed == self._failed_posts_seen:
                self._delivered_at = time.time()
            self._failed_posts_seen = failed
            # The previous periodic summary still unsent is replaced by this one: carry its counts over.
            unsent = getattr(self._sender, "_last_heartbeat", None)
            if unsent is not None and self._last_summary is not None and unsent.report is self._last_summary:
                self._groups.carry_over(self._last_summary["groups"])
            r = self._last_summary = self._summary_locked()
            self._publish_locked()
            return r
        if self._helper is not None and self._helper.poll() is None:
            return None  # the helper process heartbeats from the progress page
        return self._heartbeat_locked()

    def _summary_locked(self) -> Dict[str, Any]:
        r = self._base("summary")
        if self._step is not None:
            r["step"] = self._step
        r["phase"] = self._phase
        r["groups"] = self._groups.build(self._open, time.monotonic())
        return r

    def _heartbeat_locked(self) -> Dict[str, Any]:
        if self.summary_mode:
            return self._summary_locked()
        r = self._base("heartbeat")
        if self._step is not None:
            r["step"] = self._step
        if self._open:
            c = self._open[-1]
            r["collective"] = {"seq": c.seq, "op": c.op, "group": c.group, "since": c.since}
        r["phase"] = self._phase
        return r

    def heartbeat(self) -> None:
        """Send a heartbeat now (the thread sends them on its own every interval). Unlike the periodic
        ones, which replace each other while unsent, this one is always delivered (phase changes)."""
        with self._lock:
            if self._sender is not None and not self._closed:
                self._sender.enqueue_locked(self._heartbeat_locked(), urgent=True)

    def _publish_locked(self) -> None:
        """Write the liveness state to the progress page (when a helper reads one). REQUIRES: lock held."""
        if self._page is None:
            return
        oldest = min(self._open, key=lambda c: c.since) if self._open else None
        summary = self.summary_mode
        try:
            self._page.write(self._step, self._phase,
                             (oldest.seq, oldest.op, oldest.group, oldest.since) if oldest else None,
                             step_since=self._step_since,
                             groups=self._groups.page_view(self._open) if summary else None,
                             delivered=self._delivered_at if summary else None)
        except (ValueError, OSError):  # the page was closed under us (shutdown)
            self._page = None

    def set_step(self, step: int) -> None:
        """Record the step now being computed, for heartbeats, without sending a step report."""
        with self._lock:
            if self._step != int(step):
                self._step_since = time.time()
            self._step = int(step)
            self._publish_locked()

    def step(self, step: int, loss: Any = None, grad_norm: Any = None, step_time_s: Optional[float] = None,
             lr: Optional[float] = None) -> None:
        """Report a finished optimizer step. loss/grad_norm may be NaN/Inf (sent as strings) or None.
        lr: the learning rate the step used; a warm restart (lr more than doubled) then restarts the
        daemon's loss baseline instead of looking like a divergence."""
        r = self._base("step")
        r["step"] = int(step)
        enc_loss, enc_gn = encode_metric(loss), encode_metric(grad_norm)
        if enc_loss is not None:
            r["loss"] = enc_loss
        if enc_gn is not None:
            r["grad_norm"] = enc_gn
        if step_time_s is not None:
            st = encode_metric(step_time_s)
            if isinstance(st, float) and st >= 0:  # the daemon rejects anything else
                r["step_time_s"] = st
        if lr is not None:
            enc_lr = encode_metric(lr)
            if isinstance(enc_lr, float) and enc_lr >= 0:
                r["lr"] = enc_lr
        urgent = isinstance(enc_loss, str) or isinstance(enc_gn, str)
        with self._lock:
            self._step = int(step)
            self._emit_locked(r, urgent=urgent)
            self._publish_locked()

    def collective_begin(self, op: str, group: str = "dp", nbytes: Optional[int] = None,
                         members: Optional[Iterable[int]] = None) -> _OpenCollective:
        """Enter a collective that completes later (asynchronous work); returns the token to pass to
        collective_end(). Heartbeats carry the oldest open collective {seq, op, group, since}.
        members: for a group whose name is not tp/pp/dp/cp/world, its global ranks (the same list on every
        member); a report of the group carries them, ascending, as `members` at most every
        MEMBERS_EVERY_S (the daemon keeps them; the repeat covers a daemon restart)."""
        mode = self.config.collective_reports
        ranks = sorted(int(m) for m in members) if members is not None else None
        with self._lock:
            seq = self._seq.get(group, 0)
            self._seq[group] = seq + 1
            c = _OpenCollective(seq, op, group, time.time(), nbytes, ranks)
            self._open.append(c)
            if mode == "summary":
                self._groups.entered(group, ranks)
            elif mode == "all":
                r = self._base("collective")
                r.update(seq=seq, op=op, group=group, state="started")
                if nbytes is not None:
                    r["bytes"] = int(nbytes)
                self._attach_members_locked(r, c)
                c.started = self._emit_locked(r)
            self._publish_locked()
        return c

    def collective_end(self, c: _OpenCollective) -> None:
        """Leave a collective entered with collective_begin(). Idempotent: a second call does nothing."""
        mode = self.config.collective_reports
        with self._lock:
            if c not in self._open:
                return
            self._open.remove(c)
            if mode == "summary":
                self._groups.completed(c.group, c.seq, time.time() - c.since)
            elif mode in ("all", "completed"):
                r = self._base("collective")
                r.update(seq=c.seq, op=c.op, group=c.group, state="completed")
                if c.nbytes is not None:
                    r["bytes"] = int(c.nbytes)
                if c.started is not None:
                    c.started.dropped = True  # if still unsent, `completed` says it all, members included
                    if "members" in c.started.report:
                        r["members"] = c.members
                if "members" not in r:
                    self._attach_members_locked(r, c)
                self._emit_locked(r)
            self._publish_locked()

    def _attach_members_locked(self, r: Dict[str, Any], c: _OpenCollective) -> None:
        if c.members is None:
            return
        now = time.monotonic()
        last = self._members_sent.get(c.group)
        if last is None or now - last >= MEMBERS_EVERY_S:
            r["members"] = c.members
            self._members_sent[c.group] = now

    @contextlib.contextmanager
    def collective(self, op: str, group: str = "dp", members: Optional[Iterable[int]] = None) -> Iterator[int]:
        """Bracket one collective call. Yields its seq (per group, from 0 in each process).
        Heartbeats sent while inside carry {seq, op, group, since}. members: as collective_begin's."""
        c = self.collective_begin(op, group, members=members)
        try:
            yield c.seq
        finally:
            self.collective_end(c)

    @contextlib.contextmanager
    def checkpoint_phase(self, kind: str = "save") -> Iterator[None]:
        """Mark a checkpoint save ("save") or load ("load"): heartbeats say phase checkpoint_save /
        checkpoint_load meanwhile, which gives the rank a longer heartbeat allowance. A heartbeat is sent
        at once on entry so the daemon knows before a long, possibly blocking, write starts."""
        phase = kind if kind in PHASES else "checkpoint_" + kind
        if phase not in PHASES or phase in ("train", "eval"):
            raise ValueError("checkpoint_phase kind must be 'save' or 'load', not %r" % kind)
        with self._phase_as(phase):
            yield

    @contextlib.contextmanager
    def eval_phase(self) -> Iterator[None]:
        """Mark an evaluation pause (no optimizer steps for a while): heartbeats say phase eval, and the
        daemon allows 10 x the hang timeout for step progress meanwhile."""
        with self._phase_as("eval"):
            yield

    def set_phase(self, phase: str) -> None:
        """Switch the phase until the next switch (zero-code mode follows model.eval()/model.train())."""
        if phase not in PHASES:
            raise ValueError("phase must be one of %s, not %r" % (", ".join(PHASES), phase))
        with self._lock:
            if self._phase == phase:
                return
            self._phase = phase
            self._publish_locked()
        self.heartbeat()

    @contextlib.contextmanager
    def _phase_as(self, phase: str) -> Iterator[None]:
        with self._lock:
            previous = self._phase
        self.set_phase(phase)
        try:
            yield
        finally:
            self.set_phase(previous)

    def checkpoint_saved(self, step: int, path: str, replicated: bool = False) -> None:
        """Report that this rank's part of checkpoint `step` is durably saved at `path`. replicated=True:
        the file holds the whole state of a replicated (pure data-parallel) job, e.g. a DDP script's
        rank-0 save, so this one report completes the checkpoint (sent as `scope: "replicated"`).
        When `path` exists, a marker `<path>.shepherd.json` naming job, attempt, rank and step is written
        beside it first (atomically), so a file an old attempt left can never pass for the new one's
        (checkpoint_owner; docs/integration.md)."""
        if self.enabled:
            write_checkpoint_marker(path, self.job, self.attempt, self.rank, step)
        r = self._base("checkpoint")
        r.update(step=int(step), path=str(path))
        if replicated:
            r["scope"] = "replicated"
        with self._lock:
            self._emit_locked(r, urgent=True)

    def finished(self, step: Optional[int] = None) -> None:
        """Report that this rank's training ended normally, and deliver it now: from then on its silence
        is no lost heartbeat, and a job another launcher starts ends (succeeded) once every rank has sent
        it (a Slurm job under `shepherdd --slurm` when Slurm says so). `python3 -m shepherd_client.run`
        sends it when the script returns or exits with status 0; never send it from a rank that failed."""
        r = self._base("finished")
        last = self._step if step is None else int(step)
        if last is not None:
            r["step"] = last
        with self._lock:
            if self.summary_mode and self._groups.pending():  # collectives since the last summary, before
                # the daemon stops listening
                self._emit_locked(self._summary_locked())
            self._emit_locked(r, urgent=True)
        self.flush()

    def report_param_hash(self, step: int, digest: str) -> None:
        r = self._base("param_hash")
        r.update(step=int(step), hash=str(digest))
        with self._lock:
            self._emit_locked(r)

    def param_hash(self, step: int, module: Any) -> str:
        """Hash `module` (an nn.Module, a state_dict, tensors or bytes; see hashing.param_digest), report
        it for `step` and return the hex digest. Call after the optimizer step, on every replica."""
        digest = param_digest(module)
        self.report_param_hash(step, digest)
        return digest

    # --- liveness helper ---------------------------------------------------------------------------

    def start_helper(self, page_dir: Optional[str] = None) -> bool:
        """Move heartbeats out of this interpreter: create the progress page and start the helper process
        (shepherd_client.helper) that reads it and heartbeats, so liveness does not depend on this
        process's GIL. True when the helper runs; False (heartbeats stay in-process) when disabled or the
        helper cannot start. Idempotent."""
        if self._sender is None or self._helper is not None:
            return self._helper is not None
        import subprocess
        import sys
        import tempfile

        from .progress_page import ProgressPage

        cfg = self.config
        base = page_dir or os.environ.get("SHEPHERD_PROGRESS_DIR") or (
            "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir())
        path = os.path.join(base, "shepherd-%s-a%d-r%d-%d.page" % (
            "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in cfg.job), cfg.attempt, cfg.rank,
            os.getpid()))
        try:
            page = ProgressPage.create(path)
            pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            env = dict(os.environ)
            env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
            env["SHEPHERD_HELPER_TOKEN"] = cfg.token
            # The helper maps the page through the inherited descriptor, not by its name: a name can go
            # before the helper opens it (a helper of an earlier process with this pid removing "its" page).
            helper = subprocess.Popen(
                [sys.executable, "-m", "shepherd_client.helper", "--page", path, "--page-fd", str(page.fileno()),
                 "--parent", str(os.getpid()),
                 "--url", cfg.url, "--job", cfg.job, "--rank", str(cfg.rank), "--attempt", str(cfg.attempt),
                 "--interval", str(cfg.heartbeat_interval_s), "--token-env", "SHEPHERD_HELPER_TOKEN",
                 "--slurm-job-id", cfg.slurm_job_id, "--envelope", json.dumps(cfg.envelope())],
                env=env, stdin=subprocess.DEVNULL, close_fds=True, pass_fds=(page.fileno(),))
        except (OSError, ValueError) as e:
            log.warning("shepherd: cannot start the heartbeat helper (%s); heartbeats stay in-process", e)
            return False
        with self._lock:
            self._page, self._helper = page, helper
            self._publish_locked()
        return True

    @property
    def helper_pid(self) -> Optional[int]:
        return self._helper.pid if self._helper is not None else None

    def _stop_helper(self, detach: bool = False) -> None:
        """Stop the helper, or with detach=True leave it heartbeating until this process is gone (it exits
        with its parent; its mapping of the page outlives the name): the interpreter's own teardown
        (torch's can take seconds on a busy machine) is still a live rank, not a lost one."""
        with self._lock:
            page, helper = self._page, self._helper
            self._page = None
        if page is None:
            return
        if detach:
            page.close(unlink=True)
            return
        try:
            page.write(self._step, self._phase, None, closed=True)  # the helper exits on its next read
        except (ValueError, OSError):
            pass
        if helper is not None:
            try:
                helper.wait(timeout=self.config.heartbeat_interval_s + 2.0)
            except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired: do not hang the rank's exit
                helper.kill()
                helper.wait()
        page.close(unlink=True)

    # --- lifecycle --------------------------------------------------------------------------------

    def flush(self) -> bool:
        """Send everything buffered now, in this thread (blocks up to the HTTP timeout per POST).
        True when all of it reached the daemon (always True when disabled); False when some is left unsent
        or the daemon refused a batch for good (a 4xx such as 401: those reports are dropped)."""
        return self._sender.flush() if self._sender is not None else True

    def close(self, flush: bool = True, _at_exit: bool = False) -> None:
        """Stop the heartbeat thread and (by default) send what is buffered. Idempotent."""
        if self._closed:
            return
        if flush and self._sender is not None and self.summary_mode and self._groups.pending():
            with self._lock:  # the collectives since the last summary go with the final flush
                self._emit_locked(self._summary_locked())
        self._closed = True
        self._stop_helper(detach=_at_exit)
        if self._sender is not None:
            self._sender.close(flush=flush)
            atexit.unregister(self._close_at_exit)

    def _close_at_exit(self) -> None:
        self.close(_at_exit=True)

    def _disable_in_forked_child(self) -> None:
        """In a forked child (os.register_at_fork): this copy becomes a disabled client. Its buffer, progress
        page and helper are the rank's (the page is shared memory): never sent, written or stopped from here.
        The lock is replaced: a thread of the rank may have held it at the fork, and no thread of the rank
        exists here to release it. The rank's objects stay referenced, so collecting them here does nothing."""
        self._inherited = (self._sender, self._page, self._helper)
        self._lock = threading.Lock()
        self._sender = self._page = self._helper = None

    def __enter__(self) -> "ShepherdClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        c = self.config
        return "ShepherdClient(%s, job=%r, attempt=%d, rank=%d/%d)" % (
            c.url or "disabled", c.job, c.attempt, c.rank, c.world_size)


# Enabled clients of this process, disabled in a forked child (after_in_child runs in the child alone).
_enabled_clients: "weakref.WeakSet[ShepherdClient]" = weakref.WeakSet()


def _disable_clients_in_forked_child() -> None:
    for c in list(_enabled_clients):
        c._disable_in_forked_child()
    _enabled_clients.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_disable_clients_in_forked_child)
