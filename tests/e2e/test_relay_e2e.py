"""Relayed reports end to end (docs/agent-protocol.md, "Relayed reports"): the real shepherdd, a real
`shepherdd agent` and a rank using shepherd_client. The rank's reports (steps, a checkpoint) reach the daemon
through its agent's heartbeats, never by POST /v1/jobs/{id}/reports; and a checkpoint the rank reports while
the daemon is down (killed, then started again on the same database and port) arrives afterwards.
Every wait has a deadline; nothing sleeps for correctness.
"""
import os
import signal
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from cluster import Cluster  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
RANK = os.path.join(HERE, "relay_rank.py")
CLIENT = os.path.normpath(os.path.join(HERE, "../../clients/python"))
PYTHON = "/usr/bin/python3"


def metric_lines(text, prefix):
    return [line for line in text.splitlines() if line.startswith(prefix)]


class RelayE2E(unittest.TestCase):
    def setUp(self):
        # A lease well past the outage below: the agent's ranks keep running while the daemon is away.
        self.c = Cluster({"agent_lease_s": 60})
        self.addCleanup(self.c.close)
        self.work = self.c.path("work")
        os.makedirs(self.work)
        os.makedirs(self.c.path("ckpt"))
        self.c.start_agent("n0", gpus=1, heartbeat_interval=0.5)

    def metrics(self):
        with urllib.request.urlopen(self.c.url + "/metrics", timeout=10) as r:
            return r.read().decode()

    def posts_to(self, route):
        """POST requests to `route` (a route pattern) the daemon answered since it started, by its counters."""
        total = 0
        for line in metric_lines(self.metrics(), "shepherd_http_requests_total{"):
            if 'route="%s"' % route in line and 'method="POST"' in line:
                total += int(float(line.rsplit(" ", 1)[1]))
        return total

    def posts_to_reports_route(self):
        return self.posts_to("/v1/jobs/{id}/reports")

    def checkpoint_steps(self, job):
        return {c["step"] for c in self.c.api("GET", "/v1/jobs/%s/checkpoints" % job)["checkpoints"]}

    def save_checkpoint(self):
        """Asks the rank for a checkpoint; returns the step it saved at."""
        open(os.path.join(self.work, "checkpoint-now"), "w").close()

        def saved():
            names = [n for n in os.listdir(self.work) if n.startswith("saved-")]
            return names and max(int(n[6:]) for n in names)
        before = {n for n in os.listdir(self.work) if n.startswith("saved-")}
        return self.c.wait_for(lambda: {n for n in os.listdir(self.work) if n.startswith("saved-")} != before
                               and saved(), 30, "the rank to save a checkpoint")

    def test_reports_arrive_through_the_agent_and_survive_a_daemon_outage(self):
        spec = {
            "name": "relay",
            "model": {"parameters": 1e6, "layers": 2, "hidden": 64, "heads": 4, "seq_len": 64, "vocab": 1000},
            "training": {"global_batch_size": 8, "micro_batch_size": 1},
            "parallelism": {"tp": 1, "pp": 1, "dp": 1, "zero_stage": 0},
            "resources": {"gpus": 1, "gpus_per_node": 1, "gpu_memory_gib": 80},
            "command": [PYTHON, RANK, self.work, self.c.path("ckpt")],
            "env": {"PYTHONPATH": CLIENT, "PYTHONUNBUFFERED": "1"},
            "policy": {"heartbeat_interval_s": 0.5, "heartbeat_timeout_s": 20, "hang_timeout_s": 60,
                       "restart_backoff_s": 1, "max_restarts": 1},
        }
        started = time.monotonic()
        job = self.c.api("POST", "/v1/jobs", spec, expect=201)["id"]
        self.c.wait_for(lambda: self.c.api("GET", "/v1/jobs/" + job)["state"] == "running", 60,
                        "the agent to start the rank")
        relay = self.c.path("agent-n0", "relay", "%s-a1-r0" % job)
        self.assertTrue(os.path.isdir(relay), "the agent made the rank's relay directory")
        self.assertEqual(os.stat(relay).st_mode & 0o777, 0o700)

        # Steps and a checkpoint reach the daemon, with no POST to the reports route.
        self.c.wait_for(lambda: len(self.c.api("GET", "/v1/jobs/%s/steps" % job)["steps"]) >= 5, 60,
                        "steps relayed by the agent")
        first = self.save_checkpoint()
        self.c.wait_for(lambda: first in self.checkpoint_steps(job), 30, "checkpoint %d relayed" % first)
        accepted = metric_lines(self.metrics(), 'shepherd_reports_total{outcome="accepted"}')
        self.assertTrue(accepted and float(accepted[0].rsplit(" ", 1)[1]) >= 5, accepted)
        self.assertEqual(self.posts_to_reports_route(), 0)
        heartbeats = self.posts_to("/v1/nodes/{id}/heartbeat")
        self.assertGreater(heartbeats, 0)  # the counters do count POSTs
        print("E2E-RELAY: %.1f s: %d node heartbeats carried %d accepted reports; 0 report POSTs" % (
            time.monotonic() - started, heartbeats, float(accepted[0].rsplit(" ", 1)[1])))

        # The daemon dies; the rank saves a checkpoint meanwhile, and its report waits in the relay directory.
        self.c.stop_daemon(signal.SIGKILL)
        during = self.save_checkpoint()
        self.assertGreater(during, first)
        self.c.wait_for(lambda: any(n.endswith(".json") for n in os.listdir(relay)), 10,
                        "batch files waiting for the agent")
        self.c.start_daemon_again()
        self.c.wait_for(lambda: during in self.checkpoint_steps(job), 30,
                        "the checkpoint saved while the daemon was down (step %d)" % during)
        self.c.wait_for(lambda: any(s["step"] > during for s in self.c.api("GET", "/v1/jobs/%s/steps" % job)["steps"]),
                        30, "steps after the restart")
        self.assertEqual(self.c.api("GET", "/v1/jobs/" + job)["state"], "running")
        self.assertEqual(self.c.api("GET", "/v1/jobs/" + job)["attempt"], 1)
        self.assertEqual(self.posts_to_reports_route(), 0)


if __name__ == "__main__":
    unittest.main()
