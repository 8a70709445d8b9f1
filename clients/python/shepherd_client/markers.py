"""Checkpoint markers: `<path>.shepherd.json` beside a checkpoint file names the job, attempt, rank and
step that wrote it, so a file an old attempt left can never pass for the new one's (docs/integration.md).
Pure functions over files; they never raise. Re-exported by client.py.
"""

import json
import os
from typing import Optional

MARKER_SUFFIX = ".shepherd.json"


def write_checkpoint_marker(path: str, job: str, attempt: int, rank: int, step: int) -> None:
    """Writes <path>.shepherd.json = {"job", "attempt", "rank", "step"} (write + rename) when `path` exists.
    Never raises: a marker that cannot be written only leaves the file unmarked."""
    try:
        if not os.path.exists(path):
            return
        marker = str(path) + MARKER_SUFFIX
        tmp = "%s.tmp-%d" % (marker, os.getpid())
        with open(tmp, "w") as f:
            json.dump({"job": job, "attempt": int(attempt), "rank": int(rank), "step": int(step)}, f)
        os.replace(tmp, marker)
    except OSError:
        pass


def checkpoint_owner(path: str) -> Optional[dict]:
    """The marker of the checkpoint at `path` ({"job", "attempt", "rank", "step"}), or None when it has none.
    A resumed attempt compares it with the checkpoint the daemon recorded (job and attempt) before trusting
    the file."""
    try:
        with open(str(path) + MARKER_SUFFIX) as f:
            m = json.load(f)
        return m if isinstance(m, dict) else None
    except (OSError, ValueError):
        return None


def checkpoint_refusal(path: str, job: str, attempt: Optional[int], step: Optional[int]) -> Optional[str]:
    """Why the checkpoint at `path` must not be resumed from, or None. `job`, `attempt` and `step` are what
    the daemon recorded for it (SHEPHERD_JOB, SHEPHERD_RESUME_ATTEMPT, SHEPHERD_RESUME_STEP; attempt None:
    not told). Refused: the file's marker names another job, attempt or step; or the markers of the files
    beside it saved for the same step (the other ranks' parts) name more than one attempt, or an attempt
    other than the one that completed it. An unmarked file is not refused (a client that could not write
    its marker). Never raises."""
    own = checkpoint_owner(path)
    if own is not None:
        if own.get("job") != job:
            return "its marker names job %r, not %r" % (own.get("job"), job)
        if attempt is not None and own.get("attempt") != attempt:
            return "its marker names attempt %r, not attempt %d that completed it" % (own.get("attempt"), attempt)
        if step is not None and own.get("step") != step:
            return "its marker names step %r, not %d" % (own.get("step"), step)
    directory = os.path.dirname(os.path.abspath(str(path)))
    attempts = set()
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(MARKER_SUFFIX))
    except OSError:
        names = []
    for name in names[:4096]:
        m = checkpoint_owner(os.path.join(directory, name[: -len(MARKER_SUFFIX)]))
        if m is None or m.get("job") != job or (step is not None and m.get("step") != step):
            continue
        attempts.add(m.get("attempt"))
    if own is not None:
        attempts.add(own.get("attempt"))
    if len(attempts) > 1:
        return "the files of step %s in %s come from attempts %s" % (
            step, directory, ", ".join(str(a) for a in sorted(attempts, key=str)))
    if attempt is not None and attempts and attempts != {attempt}:
        return "the files of step %s in %s come from attempt %s, not attempt %d that completed it" % (
            step, directory, next(iter(attempts)), attempt)
    return None

