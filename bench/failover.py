#!/usr/bin/env python3
"""Failover time of a replicated control plane: three etcd members and three shepherdd replicas on
loopback; the leader is killed with SIGKILL while a client submits jobs in a loop, and the time from the
kill to the first write the new leader accepts is measured. The killed replica is started again (on its
port) before the next round, so every round has three replicas. Prints each round, then the median and
the max.

    python3 bench/failover.py --kills 20 --ttl 5 [--shepherdd build/daemon/shepherdd]
"""
import argparse
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--ttl", type=int, default=5, help="the leader lease's TTL (--leader-ttl-s)")
    ap.add_argument("--shepherdd", default=None)
    args = ap.parse_args()
    if args.shepherdd:
        os.environ["SHEPHERDD"] = os.path.abspath(args.shepherdd)
    import replicas  # after SHEPHERDD is set
    from replicas import EtcdCluster, Replicas, wait_for

    spec = {"name": "failover-bench",
            "model": {"parameters": 1e6, "layers": 2, "hidden": 64, "heads": 4, "seq_len": 64, "vocab": 1000},
            "training": {"global_batch_size": 8, "micro_batch_size": 1},
            "parallelism": {"tp": 1, "pp": 1, "dp": 2, "zero_stage": 0},
            "resources": {"gpus": 2, "gpus_per_node": 2, "gpu_memory_gib": 80},
            "command": [sys.executable, "-c", "pass"]}
    etcd = EtcdCluster()
    r = Replicas(etcd, n=3, ttl_s=args.ttl, prefix="/shepherd-bench")
    times = []
    try:
        r.wait_leader(timeout=60)
        status, _ = r.call("POST", "/v1/nodes", {"id": "n0", "gpus": 2, "topology": {"spine": "s0", "leaf": "l0"}})
        assert status == 201, status
        for k in range(args.kills):
            leader = r.wait_leader(timeout=60)
            status, _ = r.call("POST", "/v1/jobs", spec, timeout=60)
            assert status == 201, status
            acked = []
            stop = threading.Event()

            def writer():
                while not stop.is_set():
                    sent = time.monotonic()
                    try:
                        status, _ = r.call("POST", "/v1/jobs", spec, timeout=60, first=(leader + 1) % 3)
                    except AssertionError:
                        continue
                    if status == 201:
                        acked.append((sent, time.monotonic()))
            t = threading.Thread(target=writer)
            t.start()
            try:
                wait_for(lambda: len(acked) >= 3, 30, "writes before the kill")
                killed_at = time.monotonic()
                r.kill(leader)
                # The first write sent after the kill (one sent before may have been answered by the old
                # leader just before it died).
                first = wait_for(lambda: next((a for s, a in acked if s > killed_at), None), 60,
                                 "the first write after the kill")
            finally:
                stop.set()
                t.join(timeout=120)
            times.append(first - killed_at)
            print("kill %2d: replica %d, first write accepted by the new leader after %.2f s"
                  % (k + 1, leader, times[-1]), flush=True)
            r.start(leader)
        print("failover over %d kills (TTL %d s): median %.2f s, max %.2f s"
              % (len(times), args.ttl, statistics.median(times), max(times)))
    finally:
        r.close()
        etcd.close()
    del replicas


if __name__ == "__main__":
    main()
