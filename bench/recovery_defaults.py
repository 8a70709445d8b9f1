#!/usr/bin/env python3
"""How fast a node loss is recovered with the daemon's and the job's DEFAULT timeouts (docs/concepts.md).

A real daemon (defaults but a 0.2 s tick), three real agents on this machine (n0, n1 and the spare sp0, two
CPU "GPUs" each), a 4-rank DDP job (tests/e2e/train_ddp.py, gloo) with no policy overrides. Once a checkpoint
is good, node n1 is killed (its agent and its ranks, SIGKILL). Prints, per run, seconds from the kill to the
node_lost finding's detection and to the first step of the new attempt past its resume step.

    ninja -C build shepherdd && python3 bench/recovery_defaults.py [--runs N]

Loopback only; every wait is bounded; stops its processes when done.
"""
import argparse
import datetime
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
from cluster import Cluster  # noqa: E402

TRAIN = os.path.join(HERE, "..", "tests", "e2e", "train_ddp.py")


def parse_time(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def one_run():
    # The daemon's defaults: node_heartbeat_timeout_s 10, agent_lease_s 15 (Cluster's own overrides undone).
    c = Cluster({"node_heartbeat_timeout_s": 10, "agent_lease_s": 15})
    try:
        for node, spare in (("n0", False), ("n1", False), ("sp0", True)):
            c.start_agent(node, gpus=2, spare=spare)
        ckpt = c.path("ckpt")
        job = c.api("POST", "/v1/jobs", {
            "name": "ddp-defaults",
            "model": {"parameters": 1e6, "layers": 2, "hidden": 64, "heads": 4, "seq_len": 64, "vocab": 1000},
            "training": {"global_batch_size": 64, "micro_batch_size": 1},
            "parallelism": {"tp": 1, "pp": 1, "dp": 4, "zero_stage": 0},
            "resources": {"gpus": 4, "gpus_per_node": 2, "gpu_memory_gib": 80},
            "command": [sys.executable, TRAIN, "--steps", "100000", "--step-sleep", "0.1", "--ckpt-dir", ckpt,
                        "--ckpt-every", "5", "--sdc-every", "5"],
            "env": {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"},
            "checkpoint": {"dir": ckpt, "every_steps": 5},
            "policy": {"sdc_check_every_steps": 5, "good_after_steps": 3},
        }, expect=201)["id"]
        c.wait_for(lambda: any(cp["status"] == "good" for cp in
                               c.api("GET", "/v1/jobs/%s/checkpoints" % job)["checkpoints"]),
                   240, "a good checkpoint")
        killed_at = time.time()
        c.kill_node("n1")

        def lost():
            for f in c.api("GET", "/v1/jobs/%s/failures" % job)["failures"]:
                if f["kind"] == "node_lost":
                    return f
            return None
        finding = c.wait_for(lost, 120, "node_lost")

        def resumed():
            j = c.api("GET", "/v1/jobs/" + job)
            a = j.get("current_attempt") or {}
            h = c.api("GET", "/v1/jobs/%s/health" % job)
            if j["state"] != "running" or a.get("number", 1) < 2 or h.get("attempt") != a["number"]:
                return None
            job_step = h.get("checks", {}).get("hang", {}).get("job_step", -1)
            return time.time() if job_step > a["resume_step"] else None
        resumed_at = c.wait_for(resumed, 240, "training resumed", interval=0.1)
        return parse_time(finding["detected_at"]) - killed_at, resumed_at - killed_at
    finally:
        c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    for i in range(args.runs):
        named, trained = one_run()
        print("run %d: node_lost %.1f s after the kill, training again %.1f s after it" % (i + 1, named, trained),
              flush=True)


if __name__ == "__main__":
    main()
