#!/usr/bin/env python3
"""Per-step cost of the zero-code instrumentation on the stock DDP script (tests/e2e/stock_ddp.py), 2 ranks,
CPU/gloo, no step sleep, no checkpoints; reports go to an in-process fake daemon (HTTP, 202).

    /usr/bin/python3 bench/stock_overhead.py [--steps 1000] [--repeat 3]

Each run starts 2 ranks of stock_ddp.py under bench/timed_run.py, which records the time of every optimizer
step and prints the median interval after 50 warm-up steps (rank 0's is used): plain, and with
shepherd_client.install() first (exactly what `python3 -m shepherd_client.run` does), SHEPHERD_SDC_EVERY=100,
reports to an in-process fake daemon. Modes alternate, --repeat times each; the median of the runs' medians
is printed, which is robust on a shared, loaded machine. Also times param_digest (the SDC hash) on the stock
model and on a 25M-parameter model.
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CLIENT = os.path.join(ROOT, "clients", "python")
STOCK = os.path.join(ROOT, "tests", "e2e", "stock_ddp.py")
sys.path.insert(0, os.path.join(CLIENT, "tests"))
sys.path.insert(0, CLIENT)
from fake_server import FakeDaemon  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(steps, instrumented, url):
    """Median per-step seconds of rank 0."""
    port = free_port()
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", PYTHONPATH=CLIENT)
        if instrumented:
            env.update(SHEPHERD_URL=url, SHEPHERD_JOB="job-bench", SHEPHERD_PARALLELISM="1,1,2",
                       SHEPHERD_RANK_COORDS="0,0,%d" % rank, SHEPHERD_SDC_EVERY="100")
        cmd = [sys.executable, os.path.join(HERE, "timed_run.py")] + (["--instrument"] if instrumented else []) + [
            STOCK, "--steps", str(steps), "--ckpt-every", "0"]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE))
    outs = [p.communicate(timeout=900)[0].decode() for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    line = [x for x in outs[0].splitlines() if x.startswith("STEP-TIME")][0]
    return float(line.split("median_ms=")[1].split()[0]) / 1e3


def digest_cost():
    import torch

    from shepherd_client.hashing import param_digest

    out = []
    small = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    big = torch.nn.Sequential(*[torch.nn.Linear(2500, 2500) for _ in range(4)])  # 25.0M parameters
    for name, m in (("stock model (577 params)", small), ("25M params fp32", big)):
        n = 200 if m is small else 3
        t = time.perf_counter()
        for _ in range(n):
            param_digest(m)
        out.append((name, (time.perf_counter() - t) / n))
    return out


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--steps", type=int, default=1000)
    a.add_argument("--repeat", type=int, default=3)
    args = a.parse_args()
    fake = FakeDaemon()
    runs = {False: [], True: []}
    for _ in range(args.repeat):
        for instrumented in (False, True):
            runs[instrumented].append(run(args.steps, instrumented, fake.url))
    fake.close()
    res = {k: statistics.median(v) for k, v in runs.items()}
    print("runs (ms/step): plain %s, instrumented %s" % (
        [round(x * 1e3, 3) for x in runs[False]], [round(x * 1e3, 3) for x in runs[True]]))
    for instrumented, per in res.items():
        print("%-13s %.3f ms/step  %.1f steps/s" % ("instrumented" if instrumented else "plain", per * 1e3, 1 / per))
    print("overhead      %+.3f ms/step (%+.1f%%)" % ((res[True] - res[False]) * 1e3,
                                                     100 * (res[True] / res[False] - 1)))
    for name, s in digest_cost():
        print("param_digest  %-26s %.3f ms/call" % (name, s * 1e3))
    print("load average  %.2f %.2f %.2f on %d cores" % (os.getloadavg() + (os.cpu_count(),)))


if __name__ == "__main__":
    main()
