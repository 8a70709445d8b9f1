"""Which process is the rank: a child process of an instrumented rank must never report as the rank.

Children inherit the rank's environment (RANK, SHEPHERD_URL, ...), so on its own a child that creates a
client is indistinguishable from the rank. The cases that do so: a script calling install() at its top level,
which every spawned multiprocessing child (DataLoader workers with the "spawn" or "forkserver" start method,
a spawn-context Pool) runs again as __mp_main__; a forked child, which inherits the rank's client itself; a
subprocess that imports the client. Their heartbeats, built from their own state ("in no collective"), hid
the rank's real one (a hang went unseen).

Contract:
- claim() is called by the process that instruments itself (install(), and through it the zero-code run):
  it sets SHEPHERD_CLIENT_PID to its own pid in os.environ, which every child inherits.
- inherited_from_rank() is true in a process whose SHEPHERD_CLIENT_PID is set and is not its own pid: a
  child (or later descendant) of an instrumented process. Such a process gets a disabled client.
- A process the agent (or srun, torchrun) starts has no SHEPHERD_CLIENT_PID (the daemon rejects SHEPHERD_*
  variables in a job's env), so a rank, and a fresh attempt of it, is never taken for a child; a rank that
  re-executes itself keeps its pid and stays the rank.
- multiprocessing.parent_process() alone is not used: a rank may itself be a multiprocessing child of a
  launcher that is not instrumented (torch.multiprocessing.spawn, an elastic function entry point).
"""

import os
from typing import Mapping, Optional

CLIENT_PID_ENV = "SHEPHERD_CLIENT_PID"


def inherited_from_rank(environ: Optional[Mapping[str, str]] = None) -> bool:
    """True when `environ` (default os.environ) names another process as the instrumented one: this process
    is a child of an instrumented rank and must not report as it."""
    env = os.environ if environ is None else environ
    owner = env.get(CLIENT_PID_ENV, "").strip()
    return bool(owner) and owner != str(os.getpid())


def claim() -> None:
    """Mark this process as the instrumented one, for the children it starts from now on."""
    os.environ[CLIENT_PID_ENV] = str(os.getpid())
