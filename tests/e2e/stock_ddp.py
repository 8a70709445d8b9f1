#!/usr/bin/env python3
"""A stock PyTorch DDP training script, written the way a PyTorch user writes one: no Shepherd call. The
only Shepherd-specific line reads SHEPHERD_RESUME_CHECKPOINT to resume (docs/integration.md).

Launched once per rank with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the environment; CPU, gloo. A
2-layer MLP regresses a fixed random linear map on synthetic data seeded per (step, rank). Every
--ckpt-every steps rank 0 saves {model, optimizer, step} to <ckpt-dir>/step-<N>.pt (tmp file, rename)
and every rank waits at a barrier.

Under `python3 -m shepherd_client.run stock_ddp.py ...` everything Shepherd needs (steps, loss, grad norm,
DDP's all-reduces, parameter hashes, checkpoints, heartbeats) is observed from outside this file.

Options for the healthy corpus (tests/e2e/test_healthy_e2e.py), all off by default: --batch (samples per rank)
and --noise-swing (label noise scaled by 10^U(-swing, 0) per step, the same for every rank) make per-rank
losses swing; --jitter pauses 0 to J seconds after every step; --slow-save-step/--slow-save-s make rank 0's
save at that step stall (a file object that sleeps before its first write) while the others wait at the
barrier; --eval-step/--eval-s run model.eval() and evaluate for that long after that step.

For the straggler test (tests/e2e/test_straggler_e2e.py): --slow-rank R --slow-s S make rank R compute S
seconds longer every step (a busy loop before its forward pass, outside any collective): a steady extra
compute cost, so R arrives last at every all-reduce while DDP keeps every rank's step time equal.
"""

import argparse
import os
import random
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

IN, HIDDEN = 16, 32


def make_batch(step, rank, world, batch, noise_swing):
    target = torch.Generator().manual_seed(99)
    w_true = 0.25 * torch.randn(IN, 1, generator=target)
    noise = 0.05 if not noise_swing else 10 ** random.Random(step).uniform(-noise_swing, 0.0)
    g = torch.Generator().manual_seed(step * world + rank + 1)
    x = torch.randn(batch, IN, generator=g)
    return x, x @ w_true + noise * torch.randn(batch, 1, generator=g)


class StallingFile:
    """A file object that stalls once before its first write: a save to slow storage."""

    def __init__(self, f, seconds):
        self.f, self.name, self.seconds = f, f.name, seconds

    def write(self, data):
        if self.seconds:
            time.sleep(self.seconds)
            self.seconds = 0
        return self.f.write(data)

    def flush(self):
        self.f.flush()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--ckpt-dir", default="checkpoints")
    p.add_argument("--ckpt-every", type=int, default=10)
    p.add_argument("--step-sleep", type=float, default=0.0)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--noise-swing", type=float, default=0.0)
    p.add_argument("--jitter", type=float, default=0.0)
    p.add_argument("--slow-save-step", type=int, default=0)
    p.add_argument("--slow-save-s", type=float, default=0.0)
    p.add_argument("--eval-step", type=int, default=0)
    p.add_argument("--eval-s", type=float, default=0.0)
    p.add_argument("--print-every", type=int, default=10)
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow-s", type=float, default=0.0)
    args = p.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    torch.manual_seed(1234)
    jitter = random.Random(1000 + rank)
    model = torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, 1))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    start = 1
    resume = os.environ.get("SHEPHERD_RESUME_CHECKPOINT")
    if resume:
        state = torch.load(resume, map_location="cpu")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start = state["step"] + 1
        print(f"rank {rank}: resumed from step {state['step']}", flush=True)
    ddp = DDP(model)

    for step in range(start, args.steps + 1):
        if rank == args.slow_rank and args.slow_s:
            spin_until = time.monotonic() + args.slow_s
            while time.monotonic() < spin_until:
                pass
        x, y = make_batch(step, rank, world, args.batch, args.noise_swing)
        opt.zero_grad()
        loss = F.mse_loss(ddp(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ddp.parameters(), 1.0)
        opt.step()
        if args.step_sleep or args.jitter:
            time.sleep(args.step_sleep + jitter.uniform(0, args.jitter))
        if step % args.print_every == 0:
            print(f"rank {rank} step {step} loss {loss.item():.6f}", flush=True)
        if args.ckpt_every and step % args.ckpt_every == 0:
            if rank == 0:
                os.makedirs(args.ckpt_dir, exist_ok=True)
                path = os.path.join(args.ckpt_dir, f"step-{step}.pt")
                state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}
                if step == args.slow_save_step and args.slow_save_s:
                    with open(path + ".tmp", "wb") as f:
                        torch.save(state, StallingFile(f, args.slow_save_s))
                else:
                    torch.save(state, path + ".tmp")
                os.replace(path + ".tmp", path)
            dist.barrier()
        if step == args.eval_step and args.eval_s:
            ddp.eval()
            deadline = time.monotonic() + args.eval_s
            with torch.no_grad():
                while time.monotonic() < deadline:
                    ddp(torch.randn(args.batch, IN))
                    time.sleep(0.05)
            ddp.train()
            print(f"rank {rank}: evaluated {args.eval_s} s after step {step}", flush=True)

    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: done at step {args.steps}", flush=True)


if __name__ == "__main__":
    main()
