#!/usr/bin/env python3
"""A synthetic training rank for tests: no torch, no GPU, just the reports a real rank would send.

Each step (numbered 1..--steps): "compute" for part of --step-time, one all-reduce in group dp (bracketed
by ShepherdClient.collective), the rest of the step time, then a step report (deterministic loss and
grad norm). Every --hash-every steps a param_hash that is identical across the DP replicas of one (tp, pp)
position, unless corrupted. Every --ckpt-every steps each rank writes <ckpt-dir>/step-N/rank-R (JSON) and
reports checkpoint `step-N` with the path <ckpt-dir>/step-N. With SHEPHERD_RESUME_CHECKPOINT set it
resumes after the step in that path (and inherits a corruption recorded in its rank file, since a
checkpoint saved after corruption holds corrupted parameters). Exits 0 after the last step.

Faults (--fault or SHEPHERD_FAULT; several separated by commas), for the ranks in --fault-rank /
SHEPHERD_FAULT_RANK (comma-separated; every rank when unset) and only in attempt --fault-attempt /
SHEPHERD_FAULT_ATTEMPT (default 1; "all" for every attempt):
  hang@N        hang inside step N's dp all-reduce; heartbeats continue with the collective open
  hang-cpu@N    hang before step N's all-reduce, outside any collective; heartbeats continue (no progress)
  die@N[:CODE]  at the start of step N flush reports and exit with CODE (default 1)
  slow@N:F      from step N on every step takes F times --step-time (default F 3.0)
  corrupt@N     from step N on the param hash differs from the replicas'
  nan@N / inf@N from step N on report loss and grad_norm NaN (or +Inf)
The job env cannot carry SHEPHERD_* variables (the daemon rejects them), so through shepherdd use the
flags in `command`; the env variables suit runs by hand or variables inherited from an agent.

With --sync-dir and --dp-size the all-reduce really waits for the other members of the rank's DP group
(same tp, pp) through marker files in that directory (one machine only), so a rank that stops makes its
peers wait inside the collective, as in real DDP.
"""

import argparse
import dataclasses
import hashlib
import json
import math
import os
import re
import sys
import time
from typing import List, Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shepherd_client import ShepherdClient  # noqa: E402

FAULT_KINDS = {"hang": "hang", "hang-cpu": "hang_cpu", "hang_cpu": "hang_cpu", "stall": "hang_cpu",
               "die": "die", "slow": "slow", "corrupt": "corrupt", "nan": "nan", "inf": "inf"}


@dataclasses.dataclass
class Fault:
    kind: str  # hang, hang_cpu, die, slow, corrupt, nan, inf
    step: int
    arg: Optional[float] = None  # exit code for die, factor for slow


def parse_faults(spec: Optional[str]) -> List[Fault]:
    """"hang@12", "die@12", "die@12:3", "slow@12:3.0", "corrupt@12", "nan@12", comma-separated.
    Raises ValueError on a malformed spec."""
    faults: List[Fault] = []
    for part in (spec or "").split(","):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"([a-z_-]+)@(\d+)(?::([0-9.eE+-]+))?", part)
        if not m or m.group(1) not in FAULT_KINDS:
            raise ValueError("bad fault %r: expected KIND@STEP[:ARG], KIND one of %s"
                             % (part, ", ".join(sorted(FAULT_KINDS))))
        kind, step, arg = FAULT_KINDS[m.group(1)], int(m.group(2)), m.group(3)
        value = float(arg) if arg is not None else None
        if kind == "slow":
            value = 3.0 if value is None else value
            if not (math.isfinite(value) and value > 0):
                raise ValueError("bad fault %r: slow factor must be > 0" % part)
        elif kind == "die":
            value = 1 if value is None else int(value)
        elif value is not None:
            raise ValueError("bad fault %r: %s takes no argument" % (part, kind))
        faults.append(Fault(kind, step, value))
    return faults


def parse_ranks(spec: Optional[str]) -> Optional[set]:
    """"5" or "1,5" -> {1, 5}; None/empty -> None (every rank)."""
    if spec is None or not spec.strip():
        return None
    return {int(x) for x in spec.split(",") if x.strip()}


def fault_applies(ranks: Optional[set], attempt_spec: str, rank: int, attempt: int) -> bool:
    if ranks is not None and rank not in ranks:
        return False
    a = (attempt_spec or "1").strip().lower()
    return a in ("all", "*") or attempt in {int(x) for x in a.split(",") if x.strip()}


def parse_step_from_path(path: str) -> Optional[int]:
    """The N of the last "step-N" (or "step_N") in a checkpoint path."""
    found = re.findall(r"step[-_](\d+)", path)
    return int(found[-1]) if found else None


def synthetic_hash(tp: int, pp: int, step: int, corrupt_rank: Optional[int] = None) -> str:
    text = "synthetic-params tp=%d pp=%d step=%d" % (tp, pp, step)
    if corrupt_rank is not None:
        text += " corrupted on rank %d" % corrupt_rank
    return hashlib.sha256(text.encode()).hexdigest()


def synthetic_loss(step: int) -> float:
    return 4.0 / math.sqrt(step + 1) + 0.01 * math.sin(step)


def write_atomic(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = "%s.tmp-%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def hang_forever(what: str) -> None:
    print(what, flush=True)
    while True:  # SIGTERM (default action) ends the process
        time.sleep(3600)


class DpBarrier:
    """Waits until all --dp-size members of this rank's DP group reached the same seq (marker files)."""

    def __init__(self, root: str, job: str, attempt: int, tp: int, pp: int, rank: int, size: int):
        self.dir = os.path.join(root, "%s-a%d" % (job or "job", attempt), "dp-t%d-p%d" % (tp, pp))
        self.rank, self.size = rank, size

    def wait(self, seq: int) -> None:
        d = os.path.join(self.dir, "seq-%d" % seq)
        os.makedirs(d, exist_ok=True)
        open(os.path.join(d, "rank-%d" % self.rank), "w").close()
        # Every member left seq-2 before anyone could pass seq-1, so our old marker can go.
        try:
            os.unlink(os.path.join(self.dir, "seq-%d" % (seq - 2), "rank-%d" % self.rank))
        except OSError:
            pass
        while len(os.listdir(d)) < self.size:
            time.sleep(0.01)


def build_parser() -> argparse.ArgumentParser:
    env = os.environ
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=100, help="last step to run (steps are 1..N)")
    p.add_argument("--step-time", type=float, default=0.1, help="seconds per step")
    p.add_argument("--ckpt-dir", default=env.get("SHEPHERD_CKPT_DIR"), help="checkpoints go here")
    p.add_argument("--ckpt-every", type=int, default=10, help="checkpoint every N steps (0: never)")
    p.add_argument("--hash-every", type=int, default=int(env.get("SHEPHERD_SDC_EVERY") or 10),
                   help="param_hash every N steps (0: never)")
    p.add_argument("--fault", default=env.get("SHEPHERD_FAULT"), help="e.g. hang@12, die@12, slow@12:3")
    p.add_argument("--fault-rank", default=env.get("SHEPHERD_FAULT_RANK"), help="ranks, e.g. 5 or 1,5")
    p.add_argument("--fault-attempt", default=env.get("SHEPHERD_FAULT_ATTEMPT") or "1",
                   help="attempts the fault applies to, e.g. 1 or 1,2 or all")
    p.add_argument("--sync-dir", default=None, help="really synchronise DP all-reduces through this dir")
    p.add_argument("--dp-size", type=int, default=0, help="members per DP group (with --sync-dir)")
    p.add_argument("--heartbeat-interval", type=float, default=None, help="overrides the env default")
    p.add_argument("--collective-reports", default=None, choices=("summary", "all", "completed", "none"),
                   help="overrides SHEPHERD_COLLECTIVE_REPORTS (a job's env cannot set SHEPHERD_ variables)")
    p.add_argument("--quiet", action="store_true", help="no per-step line on stdout")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        faults = parse_faults(args.fault)
        fault_ranks = parse_ranks(args.fault_rank)
    except ValueError as e:
        print("shepherd_worker: %s" % e, file=sys.stderr)
        return 2
    overrides = {}
    if args.heartbeat_interval:
        overrides["heartbeat_interval_s"] = args.heartbeat_interval
    if args.collective_reports:
        overrides["collective_reports"] = args.collective_reports
    client = ShepherdClient.from_env(**overrides)
    rank, attempt = client.rank, client.attempt
    tp, pp, _dp = client.coords or (0, 0, rank)
    if not fault_applies(fault_ranks, args.fault_attempt, rank, attempt):
        faults = []
    by_kind = {f.kind: f for f in faults}
    barrier = None
    if args.sync_dir and args.dp_size > 1:
        barrier = DpBarrier(args.sync_dir, client.job, attempt, tp, pp, rank, args.dp_size)

    start, corrupt_since = 1, None
    if client.resume_checkpoint:
        resumed = parse_step_from_path(client.resume_checkpoint)
        with client.checkpoint_phase("load"):
            try:
                with open(os.path.join(client.resume_checkpoint, "rank-%d" % rank)) as f:
                    state = json.load(f)
                resumed = int(state["step"])
                corrupt_since = state.get("corrupt_since")
            except (OSError, ValueError, KeyError) as e:
                print("rank %d: no readable rank file in %s (%s); using the path's step"
                      % (rank, client.resume_checkpoint, e), flush=True)
        if resumed is None:
            print("rank %d: cannot tell the step of checkpoint %r" % (rank, client.resume_checkpoint),
                  file=sys.stderr)
            client.close()
            return 2
        start = resumed + 1
        print("rank %d: resumed from step %d" % (rank, resumed), flush=True)
    print("rank %d/%d attempt %d: steps %d..%d%s" % (rank, client.world_size, attempt, start, args.steps,
          (" faults " + ",".join("%s@%d" % (f.kind, f.step) for f in faults)) if faults else ""),
          flush=True)

    slow = 1.0
    for step in range(start, args.steps + 1):
        t0 = time.monotonic()
        client.set_step(step)
        f = by_kind.get("die")
        if f and step >= f.step:
            print("rank %d: fault die at step %d" % (rank, step), flush=True)
            client.close()
            os._exit(int(f.arg))
        f = by_kind.get("slow")
        if f and step >= f.step:
            slow = f.arg
        f = by_kind.get("hang_cpu")
        if f and step >= f.step:
            hang_forever("rank %d: fault hang-cpu at step %d (outside collectives)" % (rank, step))
        step_time = args.step_time * slow
        time.sleep(step_time * 0.6)  # forward + backward
        with client.collective("allreduce", group="dp") as seq:
            f = by_kind.get("hang")
            if f and step >= f.step:
                hang_forever("rank %d: fault hang at step %d inside dp#%d" % (rank, step, seq))
            if barrier is not None:
                barrier.wait(seq)
            time.sleep(step_time * 0.2)
        time.sleep(max(0.0, step_time * 0.2))  # optimizer step

        f = by_kind.get("corrupt")
        if f and step >= f.step and corrupt_since is None:
            corrupt_since = step
            print("rank %d: fault corrupt from step %d" % (rank, step), flush=True)
        loss = synthetic_loss(step)
        grad_norm = 1.0 / math.sqrt(step)
        f = by_kind.get("nan") or by_kind.get("inf")
        if f and step >= f.step:
            loss = grad_norm = float(f.kind)
        client.step(step, loss=loss, grad_norm=grad_norm, step_time_s=time.monotonic() - t0)
        if args.hash_every > 0 and step % args.hash_every == 0:
            client.report_param_hash(step, synthetic_hash(tp, pp, step,
                                                          rank if corrupt_since is not None else None))
        if args.ckpt_dir and args.ckpt_every > 0 and step % args.ckpt_every == 0:
            step_dir = os.path.join(os.path.abspath(args.ckpt_dir), "step-%d" % step)
            with client.checkpoint_phase("save"):
                state = {"step": step, "rank": rank, "attempt": attempt, "corrupt_since": corrupt_since}
                write_atomic(os.path.join(step_dir, "rank-%d" % rank), json.dumps(state).encode())
            client.checkpoint_saved(step, step_dir)
        if not args.quiet:
            print("rank %d step %d loss %s" % (rank, step, loss), flush=True)
    client.close()
    print("rank %d: done at step %d" % (rank, args.steps), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
