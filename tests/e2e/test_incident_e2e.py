"""One fault, one incident, end to end with the real daemon, real agents and a real 4-rank DDP job (gloo, CPU),
with the default timeouts (node_heartbeat_timeout_s 10, agents heartbeating every 1 s, the job's
heartbeat_timeout_s 10) but a lease of 15 s (agent_lease_s; the default 75 s would only hold the dead node's
replacements 60 s longer, docs/agent-protocol.md "Lease").

A node dies (its agent and its ranks are SIGKILLed): the surviving ranks' gloo collectives fail and their
processes exit non-zero within about a second, and the node is declared lost about 10 s later. The exits'
restart is held until every node of the attempt is heard from or one is declared lost, so the job restarts
exactly once, off the dead node, and the exits belong to the node_lost finding's incident. A genuine user
error (every agent alive) still restarts promptly: within about one agent heartbeat interval.

The recovery timeline (kill -> node_lost finding, -> the new attempt's start, -> its first step) is printed as
E2E-TIMING lines; docs/concepts.md quotes it. Every wait has a deadline.
"""
import datetime
import json
import os
import sqlite3
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import test_recovery_e2e as base  # noqa: E402  (a module import: unittest would rerun an imported class)
from cluster import Cluster  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "crashing_script.py")
AGENT_HEARTBEAT_S = 1.0  # the agent's default --heartbeat-interval
# A user error's exit -> the next attempt: the hold waits for the other agents' next heartbeat (at most one
# interval), plus the daemon's own work and a loaded two-core machine's scheduling.
USER_ERROR_RESTART_BOUND_S = AGENT_HEARTBEAT_S + 1.0


def parse_time(s):
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()


class IncidentE2E(base.RecoveryE2E):
    # Only this file's tests (the inherited fault tests run in e2e_recovery_pytorch).
    test_node_loss_uses_a_spare_and_resumes_from_last_known_good = None
    test_stopped_rank_is_the_hang_culprit_and_training_resumes = None
    test_corrupted_replica_is_named_its_node_replaced_and_bad_checkpoints_skipped = None
    test_rank_stuck_in_cpu_code_is_the_root_culprit_and_the_job_resumes_on_its_nodes = None
    test_per_collective_reports_still_name_the_rank_stuck_in_cpu_code = None
    test_two_replica_mismatch_is_replayed_and_found_transient = None
    test_two_replica_mismatch_recurring_is_told_apart_by_a_replay_without_one_node = None
    test_two_replica_mismatch_names_the_second_node_only_once_it_stops_without_it = None

    def setUp(self):
        # The daemon's default node timeout (ControllerOptions), a 15 s lease (the default is 75 s); the harness's
        # tick (0.2 s) and stop timeouts stay.
        self.c = Cluster({"node_heartbeat_timeout_s": 10, "agent_lease_s": 15})
        for node, spare, leaf in (("n0", False, "l0"), ("n1", False, "l0"), ("sp0", True, "l0"), ("sp1", True, "l1")):
            self.c.start_agent(node, gpus=2, topology="spine=s0,leaf=" + leaf, spare=spare,
                               heartbeat_interval=AGENT_HEARTBEAT_S)

    def submit_default_policy(self, command=None):
        spec = base.job_spec(self.c.path("ckpt"), command=command)
        # The policy's default timeouts (core/job.h Policy); short backoff, quick grading as in the base tests.
        spec["policy"].update({"heartbeat_interval_s": 1, "heartbeat_timeout_s": 10, "hang_timeout_s": 60})
        job = self.c.api("POST", "/v1/jobs", spec, expect=201)
        self.c.wait_for(lambda: self.c.api("GET", "/v1/jobs/" + job["id"])["state"] == "running", 120,
                        "the agents to start the job's ranks")
        return job["id"]

    def failures(self, job):
        return self.c.api("GET", "/v1/jobs/%s/failures" % job)["failures"]

    def stored_attempts(self, job):
        """The attempt records as the daemon persisted them (SQLite, read-only)."""
        db = sqlite3.connect("file:%s?mode=ro" % self.c.path("shepherd.db"), uri=True, timeout=10)
        try:
            rows = db.execute("SELECT body FROM records WHERE collection = 'attempts' AND job = ?", (job,)).fetchall()
        finally:
            db.close()
        return {a["number"]: a for a in (json.loads(r[0]) for r in rows)}

    def test_a_node_kill_is_one_incident_one_restart_rooted_at_the_node(self):
        job = self.submit_default_policy()
        self.wait_good_checkpoint(job, 10)
        t_kill = time.time()
        t0 = time.monotonic()
        killed = self.c.kill_node("n1")
        self.assertEqual(len(killed), 2)
        attempt, _ = self.wait_resumed(job, t0)
        # Let anything late settle: a second restart would come within the node-lost timeout of the first.
        self.c.wait_for(lambda: time.monotonic() - t0 > 25, 30, "the incident to settle", interval=0.5)
        j = self.c.api("GET", "/v1/jobs/" + job)
        findings = self.failures(job)
        summary = [(f["id"], f["kind"], f["attempt"], f["nodes"], f.get("incident")) for f in findings]
        self.assertEqual((j["current_attempt"]["number"], j["restarts"]), (2, 1), summary)
        lost = [f for f in findings if f["kind"] == "node_lost"]
        self.assertEqual(len(lost), 1, summary)
        root = lost[0]
        self.assertEqual((root["attempt"], root["nodes"], root["incident"]), (1, ["n1"], root["id"]), summary)
        # The surviving ranks' gloo collectives failed: their exits are members of the node's incident.
        exits = [f for f in findings if f["kind"] == "process_exit"]
        self.assertTrue(exits, "the surviving ranks did not exit: %s" % summary)
        for f in exits + [f for f in findings if f["kind"] in ("heartbeat_lost", "hang")]:
            self.assertEqual((f["attempt"], f["incident"]), (1, root["id"]), summary)
        self.assertTrue(any(a.startswith("hold the restart until n1") for a in exits[0]["actions"]), exits[0])
        stored = self.c.wait_for(lambda: (lambda a: a if 1 in a and 2 in a else None)(self.stored_attempts(job)),
                                 10, "attempts 1 and 2 stored")
        self.assertEqual(stored[1].get("ended_by"), root["id"], stored[1])
        nodes = {r["node"] for r in self.c.api("GET", "/v1/jobs/%s/placement" % job)["ranks"]}
        self.assertNotIn("n1", nodes)
        self.assert_resumed_from_good(job, attempt)
        # The timeline on the daemon's clock (this machine's clock, like t_kill).
        # A step is listed once final (a report for a later step arrived): the new attempt's first one may
        # not be yet when its ranks have just trained past the resume step.
        steps = self.c.wait_for(lambda: (lambda s: s if s["steps"] else None)(
            self.c.api("GET", "/v1/jobs/%s/steps" % job)), 30, "a final step of attempt 2", interval=0.2)
        self.assertEqual(steps["attempt"], 2)
        first_step = min(parse_time(s["time"]) for s in steps["steps"])
        lost_s = parse_time(root["detected_at"]) - t_kill
        start_s = parse_time(j["current_attempt"]["started_at"]) - t_kill
        step_s = first_step - t_kill
        self.assertLess(lost_s, start_s + 0.01)
        self.assertLess(start_s, step_s)
        print("E2E-TIMING incident_node_kill_default_timeouts node_lost_s=%.1f attempt_start_s=%.1f first_step_s=%.1f "
              "first_exit_s=%.1f" % (lost_s, start_s, step_s, min(parse_time(f["detected_at"]) for f in exits) - t_kill),
              flush=True)

    def test_a_user_error_with_every_agent_alive_restarts_within_about_one_agent_heartbeat(self):
        job = self.submit_default_policy(command=[base.PYTHON, SCRIPT])
        a2 = self.c.wait_for(lambda: (lambda j: j if j["current_attempt"]["number"] >= 2 else None)(
            self.c.api("GET", "/v1/jobs/" + job)), 60, "attempt 2")
        exits = [f for f in self.failures(job) if f["kind"] == "process_exit" and f["attempt"] == 1]
        self.assertEqual(len(exits), 1, exits)
        gap = parse_time(a2["current_attempt"]["started_at"]) - parse_time(exits[0]["detected_at"])
        print("E2E-TIMING incident_user_error_exit_to_restart_s=%.2f (agent heartbeat %.1f s)" % (gap, AGENT_HEARTBEAT_S),
              flush=True)
        self.assertGreaterEqual(gap, 0)
        self.assertLess(gap, USER_ERROR_RESTART_BOUND_S, exits[0])
        self.assertEqual(exits[0]["incident"], exits[0]["id"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
