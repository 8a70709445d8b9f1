"""What the instrumentation needs to know about a checkpoint file it sees saved (instrument.py, patch_save_load).

- is_temporary(path): a save to such a name is reported when it is renamed into place, not when it is written.
- fsync_path(path) / flush_and_fsync(f): the durable point of a save by path or to an open file object
  (os.fsync is looked up at each call).
- saved_step(obj, current): the step a saved object says it holds, else the steps taken so far.
"""

import os
from typing import Any

# The keys under which scripts store the optimizer step they saved (Megatron "iteration", Lightning/HF
# "global_step"). A save made later (in a background thread, from a deep copy) holds that step, not the one
# training has reached when torch.save returns.
STEP_KEYS = ("step", "global_step", "iteration", "iter")


def is_temporary(path: str) -> bool:
    name = os.path.basename(path)
    return ".tmp" in name or name.startswith("tmp") or "tmp-" in name or name.endswith("~") or name.startswith(".")


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
