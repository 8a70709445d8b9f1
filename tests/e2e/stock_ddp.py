#!/usr/bin/env python3
"""A stock PyTorch DDP training script, written the way a PyTorch user writes one: no Shepherd call. The
only Shepherd-specific line reads SHEPHERD_RESUME_CHECKPOINT to resume (docs/integration.md).

Launched once per rank with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the environment; CPU, gloo. A
2-layer MLP regresses a fixed random linear map on synthetic data seeded per (step, rank). Every
--ckpt-every steps rank 0 saves {model, optimizer, step} to <ckpt-dir>/step-<N>.pt (tmp file, rename)
and every rank waits at a barrier.

Under `python3 -m shepherd_client.run stock_ddp.py ...` everything Shepherd needs (steps, loss, grad norm,
DDP's all-reduces, parameter hashes, checkpoints, heartbeats) is observed from outside this file.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

IN, HIDDEN, BATCH = 16, 32, 64


def make_batch(step, rank, world):
    target = torch.Generator().manual_seed(99)
    w_true = 0.25 * torch.randn(IN, 1, generator=target)
    g = torch.Generator().manual_seed(step * world + rank + 1)
    x = torch.randn(BATCH, IN, generator=g)
    return x, x @ w_true + 0.05 * torch.randn(BATCH, 1, generator=g)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--ckpt-dir", default="checkpoints")
    p.add_argument("--ckpt-every", type=int, default=10)
    p.add_argument("--step-sleep", type=float, default=0.0)
    p.add_argument("--lr", type=float, default=0.01)
    args = p.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    torch.manual_seed(1234)
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
        x, y = make_batch(step, rank, world)
        opt.zero_grad()
        loss = F.mse_loss(ddp(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ddp.parameters(), 1.0)
        opt.step()
        if args.step_sleep:
            time.sleep(args.step_sleep)
        if step % 10 == 0:
            print(f"rank {rank} step {step} loss {loss.item():.6f}", flush=True)
        if args.ckpt_every and step % args.ckpt_every == 0:
            if rank == 0:
                os.makedirs(args.ckpt_dir, exist_ok=True)
                path = os.path.join(args.ckpt_dir, f"step-{step}.pt")
                torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step},
                           path + ".tmp")
                os.replace(path + ".tmp", path)
            dist.barrier()

    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: done at step {args.steps}", flush=True)


if __name__ == "__main__":
    main()
