"""The heartbeat helper: a separate process that reads a rank's progress page and heartbeats for it.

    python3 -m shepherd_client.helper --page PATH --parent PID --url URL --job JOB --rank R --attempt A
                                      [--interval S] [--token-env NAME]

Started by the rank's client (ShepherdClient with liveness="helper"), as its child, in its process group.
Every interval it reads the page and posts one heartbeat {step, phase, collective} built from it; the rank's
own process sends every other report (steps, collectives, hashes, checkpoints). When the rank reports
summaries (SHEPHERD_COLLECTIVE_REPORTS=summary, the default) its own thread sends them, and the helper posts
a summary built from the page (each group's completed seq and oldest open collective) only when that thread
has delivered none for more than 1.5 intervals (a rank in C code holding the GIL): one request per rank per
interval in the steady state.

It stops heartbeating, so that the daemon sees the rank as gone, exactly when the rank is:
- the parent exited (its pid is no longer our parent; also PR_SET_PDEATHSIG on Linux): the helper exits;
- the parent is stopped (SIGSTOP, state T in /proc): no heartbeat while it stays stopped;
- the page says the rank closed its client: the helper exits. (A client closed at interpreter exit does not
  say so: the helper heartbeats through the interpreter's teardown and exits with the rank.)
Whichever way it exits, it removes the page's file.
A rank blocked in C code (GIL held or not) is still running: the helper reports it alive, with the last step
or open collective it published, which is what lets the hang watchdog name it stuck rather than lost.
The token is passed in the environment (never on the command line, which other users can read).
Standard library only.
"""

import argparse
import ctypes
import json
import os
import signal
import sys
import time
from typing import Optional

from .progress_page import ProgressPage
from .transport import post_reports, reports_url

HELPER_AFTER_INTERVALS = 1.5  # as client.HELPER_AFTER_INTERVALS (not imported: the helper stays light)


def _set_parent_death_signal() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the getppid() check below still notices


def process_state(pid: int) -> Optional[str]:
    """The one-letter state of `pid` from /proc (R, S, D, T, t, Z, ...), or None when unknown or gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read()
        return data[data.rindex(b")") + 2:][:1].decode()
    except (OSError, ValueError):
        return None


def build_summary(state: dict, rank: int, attempt: int) -> dict:
    """A summary from the page: progress as the rank last published it; no arrival timing (count 0)."""
    s = {"rank": rank, "attempt": attempt, "time": time.time(), "kind": "summary", "phase": state["phase"]}
    if state["step"] is not None:
        s["step"] = state["step"]
    groups = []
    for g in state["groups"]:
        e = {"group": g["group"], "completed": g["completed"], "count": 0, "wait_s": 0.0}
        if g["open"] is not None and g["open"]["seq"] > g["completed"]:
            e["open"] = dict(g["open"])
        groups.append(e)
    s["groups"] = groups
    return s


def due(state: dict, now: float, interval: float) -> Optional[str]:
    """What the helper sends now: "heartbeat", "summary" (the rank's own thread is late), or None."""
    if not state.get("summary"):
        return "heartbeat"
    return "summary" if now - state["delivered"] > HELPER_AFTER_INTERVALS * interval else None


def build_heartbeat(state: dict, rank: int, attempt: int) -> dict:
    hb = {"rank": rank, "attempt": attempt, "time": time.time(), "kind": "heartbeat", "phase": state["phase"]}
    if state["step"] is not None:
        hb["step"] = state["step"]
    if state["collective"] is not None:
        hb["collective"] = dict(state["collective"])
    return hb


# Set by SIGTERM: the loop ends at its next turn (within one interval). Raising SystemExit from the handler
# instead would land wherever the helper happens to be, inside urllib's cleanup too, where Python prints
# "Exception ignored ... SystemExit" into the rank's log.
_stopping = False


def _stop(*_) -> None:
    global _stopping
    _stopping = True


def run(page_path: str, parent: int, url: str, job: str, rank: int, attempt: int, interval: float,
        token: str, slurm_job_id: str = "", envelope: Optional[dict] = None, page_fd: Optional[int] = None) -> int:
    _set_parent_death_signal()
    ours = None  # (device, inode) of the page: its name is removed at exit only while it is still this page's
    try:
        if page_fd is not None:
            st = os.fstat(page_fd)
            ours = (st.st_dev, st.st_ino)
        if os.getppid() != parent:
            return 0  # the parent died before the signal was armed
        page = ProgressPage.open(page_path, page_fd)
        target = reports_url(url, job, slurm_job_id)
        next_at = time.monotonic()
        try:
            while not _stopping:
                if os.getppid() != parent:
                    return 0
                state = page.read()
                if state is not None and state["closed"]:
                    return 0
                what = due(state, time.time(), interval) if state is not None else None
                if what and process_state(parent) not in ("T", "t", "Z", None):
                    report = (build_summary if what == "summary" else build_heartbeat)(state, rank, attempt)
                    post_reports(target, [report], token=token,
                                 timeout_s=max(0.5, min(2.0, interval * 2)), envelope=envelope)
                next_at = max(next_at + interval, time.monotonic() + interval / 2)
                time.sleep(max(0.0, next_at - time.monotonic()))
            return 0
        finally:
            page.close()
    finally:
        # The page's name goes with the helper: the rank is gone (a rank killed with SIGKILL never removes
        # it, and pages piled up in /dev/shm) or closed its client (it removes it too). A rank still running
        # keeps its mapping; only the name is gone. A name that now names another page (a later process with
        # the rank's pid made it) is not ours to remove.
        try:
            st = os.stat(page_path)
            if ours is None or (st.st_dev, st.st_ino) == ours:
                os.unlink(page_path)
        except OSError:
            pass


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m shepherd_client.helper")
    p.add_argument("--page", required=True)
    p.add_argument("--page-fd", type=int)  # the page, inherited from the rank (else opened by --page)
    p.add_argument("--parent", type=int, required=True)
    p.add_argument("--url", required=True)
    p.add_argument("--job", required=True)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--attempt", type=int, required=True)
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--token-env", default="SHEPHERD_TOKEN")
    p.add_argument("--slurm-job-id", default="")  # with an empty --job: bind by SLURM_JOB_ID
    p.add_argument("--envelope", default="null")  # JSON: the body's other fields on that route
    a = p.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C for the rank's group is the rank's to handle
    return run(a.page, a.parent, a.url, a.job, a.rank, a.attempt, a.interval, os.environ.get(a.token_env, ""),
               a.slurm_job_id, json.loads(a.envelope), a.page_fd)


if __name__ == "__main__":
    sys.exit(main())
