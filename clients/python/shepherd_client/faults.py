"""Test-only fault injection for end-to-end tests of the instrumentation (never set it in production).

TEST_SHEPHERD_FAULT="KIND:RANK:STEP[:ATTEMPT]" (ATTEMPT defaults to 1) acts on rank RANK right after its
optimizer step STEP, in that attempt only, so the training script itself stays stock:
- corrupt: add 1e-3 to one weight of the first DDP module (a silent data corruption; replicas diverge);
- spin: loop in Python forever (a rank stuck in CPU code; its peers block in the next all-reduce);
- gil: call libc sleep() through ctypes.PyDLL, which holds the GIL, for an hour (a long C call);
- exit: os._exit(17).
The name has no SHEPHERD_ prefix because a job spec may not set SHEPHERD_* variables.
"""

import os
import time
from typing import Any, Optional, Tuple


class Faults:
    def __init__(self, spec: Optional[Tuple[str, int, int, int]], rank: int, attempt: int):
        self.spec = spec if spec and spec[1] == rank and spec[3] == attempt else None

    def after_step(self, step: int, inst: Any) -> None:
        if self.spec is None or step != self.spec[2]:
            return
        kind = self.spec[0]
        print("shepherd test fault: %s after step %d at %.3f" % (kind, step, time.time()), flush=True)
        if kind == "corrupt":
            modules = inst.ddp_modules
            if modules:
                import torch

                with torch.no_grad():
                    next(modules[0].parameters()).view(-1)[0] += 1e-3
        elif kind == "spin":
            x = 0
            while True:
                x += 1
        elif kind == "gil":
            import ctypes

            ctypes.PyDLL(None).sleep(3600)
        elif kind == "exit":
            os._exit(17)


def parse(raw: Optional[str]) -> Optional[Tuple[str, int, int, int]]:
    if not raw:
        return None
    parts = raw.split(":")
    try:
        kind, rank, step = parts[0], int(parts[1]), int(parts[2])
        attempt = int(parts[3]) if len(parts) > 3 else 1
    except (IndexError, ValueError):
        return None
    return (kind, rank, step, attempt) if kind in ("corrupt", "spin", "gil", "exit") else None


def from_env(client: Any) -> Faults:
    return Faults(parse(os.environ.get("TEST_SHEPHERD_FAULT")), client.rank, client.attempt)
