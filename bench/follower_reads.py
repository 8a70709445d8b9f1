#!/usr/bin/env python3
"""Follower reads: three etcd members and two shepherdd replicas on loopback, `--jobs` jobs submitted to the
leader (with `--nodes` nodes, so most stay queued). Measures, one client at a time: GET /v1/jobs/{id} on
the leader and on the follower (view fresh), the follower read right after a write (a check and a full
load of the view), and the follower read that only checks the revision (view older than the bound, nothing
written). Prints the median and p95 of each in milliseconds.

    python3 bench/follower_reads.py --jobs 1000 --reads 200 [--shepherdd build/daemon/shepherdd]
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--reads", type=int, default=200)
    ap.add_argument("--shepherdd", default=None)
    args = ap.parse_args()
    if args.shepherdd:
        os.environ["SHEPHERDD"] = os.path.abspath(args.shepherdd)
    from replicas import EtcdCluster, Replicas, request, wait_for

    spec = {"name": "fr-bench",
            "model": {"parameters": 1e6, "layers": 2, "hidden": 64, "heads": 4, "seq_len": 64, "vocab": 1000},
            "training": {"global_batch_size": 8, "micro_batch_size": 1},
            "parallelism": {"tp": 1, "pp": 1, "dp": 2, "zero_stage": 0},
            "resources": {"gpus": 2, "gpus_per_node": 2, "gpu_memory_gib": 80},
            "command": [sys.executable, "-c", "pass"]}
    max_age = 0.2
    etcd = EtcdCluster()
    r = Replicas(etcd, n=2, prefix="/shepherd-frbench", config={"follower_read_max_age_s": max_age})
    try:
        leader = r.wait_leader()
        lurl, furl = r.url(leader), r.url(1 - leader)
        wait_for(lambda: (r.readyz(1 - leader) or (0, {}, {}))[2].get("leader"), 10, "the follower")
        for i in range(args.nodes):
            assert request(lurl, "POST", "/v1/nodes", {"id": "n%d" % i, "gpus": 2,
                                                       "topology": {"spine": "s0", "leaf": "l0"}})[0] == 201
        ids = []
        for i in range(args.jobs):
            status, _, job = request(lurl, "POST", "/v1/jobs", dict(spec, name="fr-%d" % i))
            assert status == 201, job
            ids.append(job["id"])

        def timed(url, path):
            t = time.monotonic()
            status, hdrs, _ = request(url, "GET", path)
            assert status == 200, (url, path, status)
            return (time.monotonic() - t) * 1e3, hdrs

        def report(what, ms):
            ms = sorted(ms)
            print("%-44s median %7.2f ms  p95 %7.2f ms  (n=%d)" % (what, statistics.median(ms),
                                                                  ms[int(len(ms) * 0.95) - 1], len(ms)))

        path = "/v1/jobs/" + ids[-1]
        timed(furl, path)  # the first load
        report("leader GET /v1/jobs/{id}", [timed(lurl, path)[0] for _ in range(args.reads)])
        fresh = []
        for _ in range(args.reads):
            ms, hdrs = timed(furl, path)
            if float(hdrs["shepherd-read-age"]) < max_age / 2:
                fresh.append(ms)
        report("follower GET /v1/jobs/{id}, view fresh", fresh)
        checked, loaded = [], []
        for i in range(min(args.reads, 30)):
            time.sleep(max_age * 1.2)  # the view is older than its bound: the next read checks
            checked.append(timed(furl, path)[0])
            assert request(lurl, "PATCH", "/v1/nodes/n0", {"schedulable": i % 2 == 1})[0] == 200
            time.sleep(max_age * 1.2)
            loaded.append(timed(furl, path)[0])
        report("follower read, revision checked (unchanged)", checked)
        report("follower read after a write (check + load)", loaded)
        _, _, text = request(furl, "GET", "/metrics")
        for line in text.splitlines():
            if line.startswith("shepherd_follower_view_load_seconds"):
                print("last load: " + line)
        print("state: %d jobs, %d nodes" % (args.jobs, args.nodes))
    finally:
        r.close()
        etcd.close()


if __name__ == "__main__":
    main()
