"""The healthy corpus: real PyTorch DDP training (4 ranks, gloo, CPU: tests/e2e/stock_ddp.py with its
corpus options) that is awkward but healthy, run by the real agents under `python3 -m shepherd_client.run`
(zero-code): noisy per-rank losses (2 samples per rank, label noise drawn per step), jittered step times, a
checkpoint save longer than the heartbeat and hang timeouts while the other ranks wait at a barrier, an
evaluation pause (model.eval()) longer than the hang timeout, all under CPU contention from a busy neighbour
process. Training must complete in attempt 1 with no recovery action and no cordon: any finding is a
no-action record (a loss spike, a step-time straggler), every node stays schedulable, and the jitter names no
straggler from arrival order (while the rule did judge its windows).

One run covers every case (they do not interact: the slow save is at step 20, the eval pause at step 40).
Each case is checked to have really happened (the phases were seen, the losses did swing), so the test
cannot pass by skipping it. Every wait has a deadline.
"""
import os
import re
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from cluster import Cluster  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
STOCK = os.path.join(HERE, "stock_ddp.py")
CLIENT = os.path.abspath(os.path.join(HERE, "..", "..", "clients", "python"))
PYTHON = "/usr/bin/python3"  # Debian's python3-torch lives here

HEARTBEAT_TIMEOUT_S = 4
HANG_TIMEOUT_S = 6
SLOW_SAVE_S = HANG_TIMEOUT_S + 3  # > heartbeat and hang timeouts, < 10 x either
EVAL_S = HANG_TIMEOUT_S + 3
NO_ACTION_KINDS = {"loss_spike", "straggler"}  # recorded or reported, never acted on (docs/recovery.md)


def spec(ckpt):
    return {
        "name": "healthy-corpus",
        "model": {"parameters": 1e6, "layers": 2, "hidden": 64, "heads": 4, "seq_len": 64, "vocab": 1000},
        "training": {"global_batch_size": 8, "micro_batch_size": 1},
        "parallelism": {"tp": 1, "pp": 1, "dp": 4, "zero_stage": 0},
        "resources": {"gpus": 4, "gpus_per_node": 2, "gpu_memory_gib": 80},
        "command": [PYTHON, "-m", "shepherd_client.run", STOCK, "--steps", "60", "--batch", "2", "--noise-swing",
                    "0.5", "--jitter", "0.2", "--print-every", "1", "--ckpt-dir", ckpt, "--ckpt-every", "10",
                    "--slow-save-step", "20", "--slow-save-s", str(SLOW_SAVE_S), "--eval-step", "40", "--eval-s",
                    str(EVAL_S)],
        "env": {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "PYTHONPATH": CLIENT, "GLOO_SOCKET_IFNAME": "lo"},
        "checkpoint": {"dir": ckpt, "every_steps": 10},
        "policy": {"heartbeat_interval_s": 0.5, "heartbeat_timeout_s": HEARTBEAT_TIMEOUT_S,
                   "hang_timeout_s": HANG_TIMEOUT_S, "startup_grace_s": 120, "sdc_check_every_steps": 5,
                   "good_after_steps": 3, "restart_backoff_s": 1, "max_restarts": 5},
    }


class HealthyCorpusE2E(unittest.TestCase):
    def setUp(self):
        self.c = Cluster()
        for node in ("n0", "n1"):
            self.c.start_agent(node, topology="spine=s0,leaf=l0")
        self.c.start_agent("sp0", topology="spine=s0,leaf=l0", spare=True)
        # The busy neighbour: a process spinning on a core of this 2-core machine for the whole run.
        self.neighbour = subprocess.Popen([PYTHON, "-c", "while True: pass"])

    def tearDown(self):
        self.neighbour.kill()
        self.neighbour.wait()
        self.assertEqual(self.c.close(), 0, "shepherdd did not exit cleanly on SIGTERM")

    def test_awkward_but_healthy_training_gets_no_action(self):
        job = self.c.api("POST", "/v1/jobs", spec(self.c.path("ckpt")), expect=201)["id"]
        seen_phases = set()
        judged_windows = [0]  # arrival-order windows the straggler rule closed (checks.straggler.arrival)

        def finished():
            h = self.c.api("GET", "/v1/jobs/%s/health" % job) or {}
            arrival = h.get("checks", {}).get("straggler", {}).get("arrival") or {}
            judged_windows[0] = max(judged_windows[0], arrival.get("windows_closed", 0))
            hb = h.get("checks", {}).get("heartbeat", {})
            if hb.get("ranks_in_checkpoint_phase"):
                seen_phases.add("checkpoint_save")
            if hb.get("ranks_in_eval_phase"):
                seen_phases.add("eval")
            j = self.c.api("GET", "/v1/jobs/" + job)
            harmed = j["state"] in ("queued", "recovering") or (j.get("current_attempt") or {}).get("number", 1) > 1
            return j if harmed or j["state"] in ("succeeded", "failed", "cancelled") else None

        final = self.c.wait_for(finished, 300, "the job to finish", interval=0.25)
        findings = self.c.api("GET", "/v1/jobs/%s/failures" % job)["failures"]
        for f in findings:
            print("HEALTHY-CORPUS finding %s: %s | actions %s" % (f["kind"], f["detail"], f["actions"]), flush=True)
        self.assertEqual(final["state"], "succeeded", findings)
        self.assertEqual(final["current_attempt"]["number"], 1, findings)
        for f in findings:
            self.assertIn(f["kind"], NO_ACTION_KINDS, f)
            self.assertNotIn("straggler", f, "jittered steps named a straggler from arrival order")
            for a in f["actions"]:
                self.assertRegex(a, r"^(record|report) only", f)
        for node in self.c.api("GET", "/v1/nodes")["nodes"]:
            self.assertTrue(node["schedulable"] and not node["failed"], node)
            self.assertNotIn("cordon", node)

        # Every case really happened.
        self.assertEqual(seen_phases, {"checkpoint_save", "eval"})
        self.assertGreaterEqual(judged_windows[0], 10, "the arrival-order rule judged no windows")
        log = self.c.rank_log("n0", job, 1, 0)
        self.assertIn("evaluated %s s after step 40" % float(EVAL_S), log)
        losses = [float(x) for x in re.findall(r"rank 0 step \d+ loss ([0-9.e+-]+)", log)]
        self.assertEqual(len(losses), 60)
        swings = [max(a, b) / max(min(a, b), 1e-12) for a, b in zip(losses, losses[1:])]
        self.assertGreaterEqual(max(swings), 10, "rank 0's loss never swung 10x between steps")
        cps = {cp["step"]: cp for cp in self.c.api("GET", "/v1/jobs/%s/checkpoints" % job)["checkpoints"]}
        self.assertIn(20, cps, "the slow checkpoint was reported")
        self.assertNotEqual(cps[20]["status"], "bad", cps[20])


if __name__ == "__main__":
    unittest.main(verbosity=2)
