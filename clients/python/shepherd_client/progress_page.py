"""The progress page: a rank's liveness state in a small shared file (mmap), written by the training process
and read by a helper process that heartbeats for it (helper.py).

Why: a rank blocked in a long C call that holds the GIL cannot run a Python heartbeat thread. The helper is a
separate process with its own interpreter, so it keeps reporting "alive, step N since T" or "alive, inside
collective X since T" from the last state the rank wrote, and the hang watchdog names the rank stuck instead
of losing it.

Layout (little-endian, PAGE_SIZE bytes; version 2):
    0   4s   magic b"SHPG"
    4   u32  version
    8   u64  generation (seqlock: odd while the writer is mid-update)
    16  i64  pid of the writer
    24  i64  step being computed (-1: unknown)
    32  f64  step_since (Unix time the step began)
    40  u32  phase (0 train, 1 checkpoint_save, 2 checkpoint_load, 3 eval)
    44  u32  open (1 when a collective is open: the fields below describe the oldest open one)
    48  i64  collective seq
    56  f64  collective since (Unix time)
    64  32s  collective op (NUL-padded UTF-8)
    96  48s  collective group
    144 f64  updated (Unix time of the last write)
    152 u32  closed (1: the rank finished; the helper exits)
    156 u32  summary (1: the rank reports summaries itself; the helper sends one only when `delivered` is old)
    160 f64  delivered (Unix time the rank's own thread last delivered its summaries)
    168 u32  number of group entries below (at most MAX_GROUPS)
    256 MAX_GROUPS entries of 112 bytes: 48s group, i64 completed (-1: none), u32 open, u32 pad,
        i64 open seq, f64 open since, 32s open op: each group's progress, for the summary the helper builds

One writer (the training process, under the client's lock); any number of readers. A reader retries while
the generation is odd or changed during its read (bounded), so it never returns a torn state.
"""

import mmap
import os
import struct
import time
from typing import Any, Dict, List, Optional, Tuple

MAX_GROUPS = 16
PAGE_SIZE = 256 + MAX_GROUPS * 112
MAGIC = b"SHPG"
VERSION = 2
PHASES = ("train", "checkpoint_save", "checkpoint_load", "eval")
_HEADER = struct.Struct("<4sI")
_GEN = struct.Struct("<Q")
_BODY = struct.Struct("<qqdII q d 32s 48s d I")  # from offset 16
_BODY_OFFSET = 16
_SUMMARY = struct.Struct("<I d I")  # from offset 156
_SUMMARY_OFFSET = 156
_GROUP = struct.Struct("<48s q I I q d 32s")
_GROUPS_OFFSET = 256


def _text(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


class ProgressPage:
    """Open with ProgressPage.create(path) (writer) or ProgressPage.open(path) (reader)."""

    def __init__(self, path: str, mm: mmap.mmap, fd: int):
        self.path = path
        self._mm = mm
        self._fd = fd
        self._gen = 0
        self._delivered = 0.0

    @classmethod
    def create(cls, path: str) -> "ProgressPage":
        """A new file of ours only: never one that exists (another user may have made it in /dev/shm, to
        write the liveness the helper reports) nor a symlink. A stale one of ours is replaced; another
        user's cannot be removed from a sticky directory, and the OSError says so."""
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(path, flags, 0o600)
        except FileExistsError:
            os.unlink(path)
            fd = os.open(path, flags, 0o600)
        os.ftruncate(fd, PAGE_SIZE)
        mm = mmap.mmap(fd, PAGE_SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        page = cls(path, mm, fd)
        _HEADER.pack_into(mm, 0, MAGIC, VERSION)
        page.write(step=None, phase="train", collective=None)
        return page

    @classmethod
    def open(cls, path: str, fd: Optional[int] = None) -> "ProgressPage":
        """The reader's view: of `fd` when given (the writer's file, inherited: whatever became of its name),
        else of the file at `path`."""
        if fd is None:
            fd = os.open(path, os.O_RDONLY)
        mm = mmap.mmap(fd, PAGE_SIZE, mmap.MAP_SHARED, mmap.PROT_READ)
        magic, version = _HEADER.unpack_from(mm, 0)
        if magic != MAGIC or version != VERSION:
            mm.close()
            os.close(fd)
            raise ValueError("%s is not a version %d progress page" % (path, VERSION))
        return cls(path, mm, fd)

    def fileno(self) -> int:
        return self._fd

    # --- writer ----------------------------------------------------------------------------------

    def write(self, step: Optional[int], phase: str, collective: Optional[Tuple[int, str, str, float]],
              step_since: Optional[float] = None, closed: bool = False,
              groups: Optional[List[Tuple[str, int, Optional[Tuple[int, str, float]]]]] = None,
              delivered: Optional[float] = None) -> None:
        """Publish the rank's state. collective = (seq, op, group, since) of the oldest open one, or None.
        groups (summary mode; None: the rank sends no summaries): per group (name, completed, (seq, op,
        since) of its oldest open collective or None), at most MAX_GROUPS; delivered: when the rank's own
        thread last delivered its summaries (None: as last written)."""
        now = time.time()
        if delivered is not None:
            self._delivered = float(delivered)
        groups = (groups or [])[:MAX_GROUPS] if groups is not None else None
        self._gen += 1
        _GEN.pack_into(self._mm, 8, self._gen)  # odd: update in progress
        seq, op, group, since = collective if collective else (0, "", "", 0.0)
        _BODY.pack_into(
            self._mm, _BODY_OFFSET, os.getpid(), -1 if step is None else int(step),
            now if step_since is None else float(step_since),
            PHASES.index(phase) if phase in PHASES else 0, 1 if collective else 0, int(seq), float(since),
            op.encode()[:32], group.encode()[:48], now, 1 if closed else 0)
        _SUMMARY.pack_into(self._mm, _SUMMARY_OFFSET, 1 if groups is not None else 0, self._delivered,
                           len(groups or ()))
        for i, (name, completed, open_) in enumerate(groups or ()):
            oseq, oop, osince = open_ if open_ else (0, "", 0.0)
            _GROUP.pack_into(self._mm, _GROUPS_OFFSET + i * _GROUP.size, name.encode()[:48], int(completed),
                             1 if open_ else 0, 0, int(oseq), float(osince), oop.encode()[:32])
        self._gen += 1
        _GEN.pack_into(self._mm, 8, self._gen)

    # --- reader ----------------------------------------------------------------------------------

    def read(self, tries: int = 100) -> Optional[Dict[str, Any]]:
        """The last consistent state, or None when no consistent read succeeded in `tries` attempts."""
        for _ in range(tries):
            g1 = _GEN.unpack_from(self._mm, 8)[0]
            if g1 % 2:
                continue
            body = _BODY.unpack_from(self._mm, _BODY_OFFSET)
            summary, delivered, n = _SUMMARY.unpack_from(self._mm, _SUMMARY_OFFSET)
            raw_groups = [_GROUP.unpack_from(self._mm, _GROUPS_OFFSET + i * _GROUP.size)
                          for i in range(min(n, MAX_GROUPS))]
            if _GEN.unpack_from(self._mm, 8)[0] != g1:
                continue
            pid, step, step_since, phase, is_open, seq, since, op, group, updated, closed = body
            out: Dict[str, Any] = {
                "pid": pid, "step": None if step < 0 else step, "step_since": step_since,
                "phase": PHASES[phase] if phase < len(PHASES) else "train", "updated": updated,
                "closed": bool(closed), "collective": None}
            if is_open:
                out["collective"] = {"seq": seq, "op": _text(op), "group": _text(group), "since": since}
            out["summary"] = bool(summary)
            out["delivered"] = delivered
            out["groups"] = [
                {"group": _text(name), "completed": completed,
                 "open": {"seq": oseq, "op": _text(oop), "since": osince} if is_open_g else None}
                for name, completed, is_open_g, _pad, oseq, osince, oop in raw_groups]
            return out
        return None

    def close(self, unlink: bool = False) -> None:
        try:
            self._mm.close()
            os.close(self._fd)
        except (OSError, ValueError):
            pass
        if unlink:
            try:
                os.unlink(self.path)
            except OSError:
                pass
