#!/usr/bin/env python3
"""Telemetry per rank: what a stock 4-rank PyTorch DDP script (tests/e2e/stock_ddp.py, CPU, gloo) sends
under `python3 -m shepherd_client.run` in each SHEPHERD_COLLECTIVE_REPORTS mode.

    /usr/bin/python3 bench/telemetry_per_rank.py [--steps 60] [--step-sleep 0.1] [--modes summary,all]

A small HTTP server stands in for the daemon (202 to every POST, counting requests, reports by kind and
body bytes per rank); the ranks run the real client, instrumentation and liveness helper. Prints, per mode,
reports per rank per step, requests and bytes per rank-second, and the kinds sent. Standard library plus
torch (/usr/bin/python3 on Debian).
"""

import argparse
import collections
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STOCK = os.path.join(ROOT, "tests", "e2e", "stock_ddp.py")
CLIENT = os.path.join(ROOT, "clients", "python")


class Counter:
    def __init__(self):
        self.lock = threading.Lock()
        self.posts = collections.Counter()  # rank -> POSTs
        self.bytes = collections.Counter()  # rank -> body bytes
        self.kinds = collections.Counter()  # kind -> reports
        self.reports = collections.Counter()  # rank -> reports


def serve(counter):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                reports = json.loads(body).get("reports", [])
            except ValueError:
                reports = []
            ranks = {r.get("rank") for r in reports}
            with counter.lock:
                for rank in ranks:  # one POST carries one rank's reports
                    counter.posts[rank] += 1
                    counter.bytes[rank] += len(body)
                for r in reports:
                    counter.kinds[r.get("kind")] += 1
                    counter.reports[r.get("rank")] += 1
            out = json.dumps({"accepted": len(reports), "rejected": [], "ignored": 0}).encode()
            self.send_response(202)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(mode, steps, step_sleep, world=4):
    counter = Counter()
    srv = serve(counter)
    d = tempfile.mkdtemp(prefix="shepherd-telemetry-")
    port = free_port()
    procs = []
    t0 = time.monotonic()
    try:
        for rank in range(world):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1",
                       SHEPHERD_URL="http://127.0.0.1:%d" % srv.server_address[1], SHEPHERD_JOB="job-000001",
                       SHEPHERD_ATTEMPT="1", SHEPHERD_PARALLELISM="1,1,%d" % world,
                       SHEPHERD_RANK_COORDS="0,0,%d" % rank, SHEPHERD_CHECKPOINT_DIR=d,
                       SHEPHERD_COLLECTIVE_REPORTS=mode, PYTHONPATH=CLIENT)
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "shepherd_client.run", STOCK, "--steps", str(steps), "--step-sleep",
                 str(step_sleep), "--ckpt-dir", d, "--ckpt-every", "20", "--print-every", "1000"],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        codes = [p.wait(timeout=1800) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        srv.shutdown()
        shutil.rmtree(d, ignore_errors=True)
    elapsed = time.monotonic() - t0
    if codes != [0] * world:
        raise SystemExit("%s: ranks exited %s" % (mode, codes))
    reports = sum(counter.reports.values()) / world
    posts = sum(counter.posts.values()) / world
    nbytes = sum(counter.bytes.values()) / world
    return {"mode": mode, "elapsed_s": elapsed, "reports_per_rank_step": reports / steps,
            "posts_per_rank_s": posts / elapsed, "bytes_per_rank_s": nbytes / elapsed,
            "kinds": dict(counter.kinds)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--step-sleep", type=float, default=0.1)
    p.add_argument("--modes", default="summary,all")
    a = p.parse_args()
    for mode in a.modes.split(","):
        r = run(mode, a.steps, a.step_sleep)
        print("mode=%-8s reports/rank/step=%.2f posts/rank/s=%.2f bytes/rank/s=%.0f elapsed_s=%.1f kinds=%s" % (
            r["mode"], r["reports_per_rank_step"], r["posts_per_rank_s"], r["bytes_per_rank_s"], r["elapsed_s"],
            json.dumps(r["kinds"], sort_keys=True)), flush=True)


if __name__ == "__main__":
    main()
