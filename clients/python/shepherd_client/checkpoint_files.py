"""What the instrumentation needs to know about a checkpoint file it sees saved (instrument.py, patch_save_load).

- is_temporary(path): a save to such a name is reported when it is renamed into place, not when it is written.
- fsync_path(path) / flush_and_fsync(f): the durable point of a save by path or to an open file object
  (os.fsync is looked up at each call).
- saved_step(obj, current): the step a saved object says it holds, else the steps taken so far.
- holds_training_state(obj, torch): whether a saved object holds parameters or optimizer state at all.
- names_rank(path, rank, world_size): whether a file is named as one rank's part ("rank_1.pt").
"""

import functools
import os
import re
import threading
from typing import Any, Callable

# The keys under which scripts store the optimizer step they saved (Megatron "iteration", Lightning/HF
# "global_step"). A save made later (in a background thread, from a deep copy) holds that step, not the one
# training has reached when torch.save returns.
STEP_KEYS = ("step", "global_step", "iteration", "iter")


TEMPORARY_SUFFIXES = ("~", ".partial", ".part", ".incomplete")


def is_temporary(rel_path: str) -> bool:
    """Whether a path below the checkpoint directory (relative to it) is a temporary name: its file or any
    directory on the way (a checkpoint written into "tmp-step_10/" and renamed into place as a whole)."""
    for name in rel_path.split(os.sep):
        if (".tmp" in name or name.startswith("tmp") or "tmp-" in name or name.startswith(".")
                or name.endswith(TEMPORARY_SUFFIXES)) and name not in (".", ".."):
            return True
    return False


def fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def flush_and_fsync(f: Any) -> bool:
    f.flush()
    os.fsync(f.fileno())
    return True


def saved_step(obj: Any, current: int) -> int:
    """The step a saved object says it holds (its first STEP_KEYS integer), else `current`."""
    if isinstance(obj, dict):
        for key in STEP_KEYS:
            v = obj.get(key)
            if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
                return v
    return current


def names_rank(path: str, rank: int, world_size: int) -> bool:
    """Whether the file's name marks it as rank `rank`'s own ("rank_1.pt", "shard-01.pt", "step_10/rank1.pt"):
    in a data-parallel job each rank saving its own file is one part each, not the whole state from the first
    rank to report (a restart loaded rank_0.pt and the missing rank_1.pt). A job of one rank has no parts."""
    if world_size <= 1:
        return False
    pattern = r"(?:rank|shard)[_-]?0*%d(?!\d)" % rank
    return re.search(pattern, os.path.basename(path), re.IGNORECASE) is not None


def holds_training_state(obj: Any, torch: Any, budget: int = 10000) -> bool:
    """True when `obj` may hold training state: a floating-point tensor or array (weights, optimizer moments),
    a module or optimizer saved whole, or an object of the script's own. False for a save of only RNG states
    (integer tensors and arrays), numbers and strings, though written beside a checkpoint (the Hugging Face
    Trainer's rng_state_<rank>.pth from every rank). Undecided after `budget` objects: True."""
    todo = [obj]
    while todo and budget > 0:
        budget -= 1
        o = todo.pop()
        if isinstance(o, torch.Tensor):
            if o.is_floating_point() or o.is_complex():
                return True
        elif isinstance(o, dict):
            todo.extend(o.values())
        elif isinstance(o, (list, tuple)):
            todo.extend(o)
        elif isinstance(o, (str, bytes, int, float, type(None))):
            continue
        elif hasattr(o, "dtype") and hasattr(o, "shape"):  # a numpy array or scalar
            if getattr(o.dtype, "kind", "f") in "fc":
                return True
        else:
            return True
    return bool(todo)


def patch_save_load(inst: Any) -> None:
    """Patches torch.save and torch.load, os.replace and os.rename for `inst` (an instrument.Instrumentation):
    the checkpoint reports and phases described in instrument.py."""
    torch = inst.torch
    orig_save, orig_load = torch.save, torch.load
    orig_replace, orig_rename = os.replace, os.rename

    @functools.wraps(orig_save)
    def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
        path = os.fspath(f) if isinstance(f, (str, bytes, os.PathLike)) else getattr(f, "name", None)
        if not isinstance(path, str) or not inst.in_ckpt_dir(path):
            return orig_save(obj, f, *args, **kwargs)
        if not holds_training_state(obj, torch):
            return orig_save(obj, f, *args, **kwargs)  # an RNG state, a counter: no restart point
        # On the training thread the state saved is the current one: the steps counted (a script's own
        # counter may count other units, a GAN's generator iterations against its critic's steps). A save
        # from another thread, of an older copy, says which step it holds.
        step = inst.step if threading.get_ident() == inst.step_thread else saved_step(obj, inst.step)
        with inst.client.checkpoint_phase("save"):
            out = orig_save(obj, f, *args, **kwargs)
            if is_temporary(os.path.relpath(os.path.abspath(path), inst.ckpt_dir)):
                inst.pending_saves[os.path.abspath(path)] = step
            elif isinstance(f, (str, bytes, os.PathLike)):
                inst._safe("checkpoint fsync", lambda: fsync_path(path))
                inst.report_checkpoint(path, step)
            elif inst._safe("checkpoint fsync", lambda: flush_and_fsync(f)):
                # A named file object, still open: its bytes are durable once flushed and fsynced.
                # Without a descriptor there is no durable point and nothing is reported.
                inst.report_checkpoint(path, step)
        return out

    def renamed(src: str, dst: str) -> None:
        # The file itself, or a directory holding it, moved: reported once its final path is no temporary
        # name, else still pending under the new one.
        for p in [p for p in inst.pending_saves if p == src or p.startswith(src + os.sep)]:
            step = inst.pending_saves.pop(p)
            new = dst + p[len(src):]
            if not inst.in_ckpt_dir(new):
                continue
            if is_temporary(os.path.relpath(new, inst.ckpt_dir)):
                inst.pending_saves[new] = step
            else:
                inst.report_checkpoint(new, step)

    def renamer(orig: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(orig)
        def rename(src: Any, dst: Any, *args: Any, **kwargs: Any) -> Any:
            out = orig(src, dst, *args, **kwargs)
            if inst.pending_saves and isinstance(src, (str, os.PathLike)) and isinstance(dst, (str, os.PathLike)):
                inst._safe("checkpoint rename", lambda: renamed(os.path.abspath(os.fspath(src)),
                                                                os.path.abspath(os.fspath(dst))))
            return out

        return rename

    @functools.wraps(orig_load)
    def load(f: Any, *args: Any, **kwargs: Any) -> Any:
        path = os.fspath(f) if isinstance(f, (str, os.PathLike)) else None
        if path and inst.resume and os.path.abspath(path) == os.path.abspath(inst.resume):
            with inst.client.checkpoint_phase("load"):
                return orig_load(f, *args, **kwargs)
        return orig_load(f, *args, **kwargs)

    torch.save, torch.load = save, load
    os.replace, os.rename = renamer(orig_replace), renamer(orig_rename)
