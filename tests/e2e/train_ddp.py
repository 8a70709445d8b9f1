#!/usr/bin/env python3
"""A real (tiny) PyTorch DDP training job that reports to shepherdd through ShepherdClient.

Launched once per rank with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the environment (as a Shepherd
node agent does; not torchrun); CPU and the gloo backend. A 2-layer MLP regresses a fixed random linear
map on synthetic data seeded per (step, rank), so every run is deterministic. Steps are numbered
1..--steps.

Each step: forward, then backward (DDP's gradient all-reduce) and the optimizer step inside
`client.collective("allreduce", group="dp")`, then a step report (loss, grad norm, step time). Every
--sdc-every steps (SHEPHERD_SDC_EVERY, default 10) each rank reports a hash of its parameters. Every
--ckpt-every steps rank 0 saves model + optimizer + step to <ckpt-dir>/step-<N>.pt (tmp file, fsync,
rename), all ranks pass a barrier, and every rank reports checkpoint N with that path; the whole save is
inside `client.checkpoint_phase("save")`. With SHEPHERD_RESUME_CHECKPOINT set, every rank loads it and
continues at its step + 1, printing "resumed from step N".

Fault hook for end-to-end tests: --corrupt RANK:STEP (or SHEPHERD_TEST_CORRUPT when run by hand; the
daemon does not pass SHEPHERD_* job env) adds 1e-3 to one weight of that rank after that step's optimizer
step, only in attempt --corrupt-attempt (default 1), so the replicas diverge from then on. --corrupt-node
NODE:STEP is a node's persistent fault instead: in every attempt, the rank running on NODE (its working
directory is that node agent's, agent-NODE, as tests/e2e/cluster.py starts them) corrupts after STEP.

Timing lines for end-to-end tests that measure goodput independently of the daemon (wall clock, Unix
seconds): "TIMING first_step <step> at <t>" once per process after its first step report, "TIMING
checkpoint <step> save_s <seconds> at <t>" after each checkpoint phase (t: when the phase ended), and
"TIMING load_s <seconds> at <t>" after loading the resume checkpoint.

Runs without shepherdd too: with SHEPHERD_URL unset the client is a no-op.
"""

import argparse
import datetime
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))
from shepherd_client import ShepherdClient  # noqa: E402

warnings.filterwarnings("ignore", category=UserWarning)  # Debian's torch warns on import (numpy, CUDA)
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

IN, HIDDEN, BATCH = 16, 32, 64


def make_model() -> torch.nn.Module:
    torch.manual_seed(1234)  # identical initial weights on every rank (DDP also broadcasts rank 0's)
    return torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, 1))


def make_batch(step: int, rank: int, world: int):
    target = torch.Generator().manual_seed(99)
    w_true = 0.25 * torch.randn(IN, 1, generator=target)
    g = torch.Generator().manual_seed(step * max(world, 1) + rank + 1)
    x = torch.randn(BATCH, IN, generator=g)
    y = x @ w_true + 0.05 * torch.randn(BATCH, 1, generator=g)
    return x, y


def parse_corrupt(spec):
    if not spec:
        return None
    r, s = spec.split(":")
    return int(r), int(s)


def save_checkpoint(path: str, model, opt, step: int) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = "%s.tmp-%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def main() -> int:
    env = os.environ
    p = argparse.ArgumentParser(description="tiny DDP job reporting to shepherdd")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--step-sleep", type=float, default=0.0, help="extra seconds per step")
    p.add_argument("--ckpt-dir", default=env.get("SHEPHERD_CKPT_DIR") or "checkpoints")
    p.add_argument("--ckpt-every", type=int, default=10, help="0: never")
    p.add_argument("--sdc-every", type=int, default=int(env.get("SHEPHERD_SDC_EVERY") or 10), help="0: never")
    p.add_argument("--corrupt", default=env.get("SHEPHERD_TEST_CORRUPT"), help="RANK:STEP")
    p.add_argument("--corrupt-attempt", type=int, default=1)
    p.add_argument("--corrupt-node", default="", help="NODE:STEP, every attempt")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--pg-timeout", type=float, default=300.0, help="gloo collective timeout, seconds")
    args = p.parse_args()

    rank, world = int(env.get("RANK", "0")), int(env.get("WORLD_SIZE", "1"))
    env.setdefault("MASTER_ADDR", "127.0.0.1")
    env.setdefault("MASTER_PORT", "29500")
    if env["MASTER_ADDR"] in ("127.0.0.1", "localhost"):
        # gloo binds to the interface the host name resolves to, which on many machines is not reachable
        # loopback-only; pin it to lo when the whole job is on this machine.
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)  # many ranks share few cores in tests

    client = ShepherdClient.from_env()
    corrupt = parse_corrupt(args.corrupt) if client.attempt == args.corrupt_attempt else None
    if args.corrupt_node:
        node, at = args.corrupt_node.split(":")
        if os.path.basename(os.getcwd()) == "agent-" + node:
            corrupt = (rank, int(at))
    ckpt_dir = os.path.abspath(args.ckpt_dir)

    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=args.pg_timeout))
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    start = 1
    if client.resume_checkpoint:
        load_t0 = time.time()
        with client.checkpoint_phase("load"):
            state = torch.load(client.resume_checkpoint, map_location="cpu")
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])
            start = int(state["step"]) + 1
        print("rank %d: TIMING load_s %.3f at %.3f" % (rank, time.time() - load_t0, time.time()), flush=True)
        print("rank %d: resumed from step %d" % (rank, start - 1), flush=True)
    ddp = DDP(model)
    print("rank %d/%d attempt %d: running steps %d..%d" % (rank, world, client.attempt, start, args.steps),
          flush=True)

    loss_v = float("nan")
    first_step = True
    for step in range(start, args.steps + 1):
        t0 = time.monotonic()
        client.set_step(step)
        x, y = make_batch(step, rank, world)
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(ddp(x), y)
        with client.collective("allreduce", group="dp"):
            loss.backward()  # DDP all-reduces the gradients here
            grad_norm = torch.nn.utils.clip_grad_norm_(ddp.parameters(), float("inf"))
            opt.step()
        if corrupt and corrupt == (rank, step):
            with torch.no_grad():
                next(model.parameters()).view(-1)[0] += 1e-3
            print("rank %d: corrupted a weight after step %d" % (rank, step), flush=True)
        if args.step_sleep > 0:
            time.sleep(args.step_sleep)
        loss_v = loss.item()
        client.step(step, loss=loss_v, grad_norm=grad_norm.item(), step_time_s=time.monotonic() - t0)
        if first_step:
            first_step = False
            print("rank %d attempt %d: TIMING first_step %d at %.3f" % (rank, client.attempt, step, time.time()),
                  flush=True)
        if args.sdc_every > 0 and step % args.sdc_every == 0:
            digest = client.param_hash(step, model)
            print("rank %d step %d loss %.6f hash %s" % (rank, step, loss_v, digest[:16]), flush=True)
        if args.ckpt_every > 0 and step % args.ckpt_every == 0:
            path = os.path.join(ckpt_dir, "step-%d.pt" % step)
            save_t0 = time.time()
            with client.checkpoint_phase("save"):
                if rank == 0:
                    save_checkpoint(path, model, opt, step)
                with client.collective("barrier", group="dp"):
                    dist.barrier()  # rank 0's file is durable before anyone reports it
            save_t1 = time.time()
            client.checkpoint_saved(step, path)
            print("rank %d: TIMING checkpoint %d save_s %.3f at %.3f" % (rank, step, save_t1 - save_t0, save_t1),
                  flush=True)
            print("rank %d: checkpoint step %d at %s" % (rank, step, path), flush=True)

    with client.collective("barrier", group="dp"):
        dist.barrier()
    dist.destroy_process_group()
    # Ended normally: a launcher that cannot see the exit (a Slurm step after a daemon restart) learns it here.
    client.finished(args.steps)
    client.close()
    print("rank %d: done at step %d, loss %.6f" % (rank, args.steps, loss_v), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
