"""User bugs that look like hardware faults, end to end with the real daemon and agents: a script whose
rank 0 raises the same exception on every attempt. The first exit restarts on the same nodes; the same exit
again on the same node moves the rank off it without blame; the same exit on another node is a deterministic
crash: the job ends `failed`, no node is cordoned, and the finding carries the traceback from the rank's log
(`log_tail`, sent by the agent with the exit). Every wait has a deadline.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import test_recovery_e2e as base  # noqa: E402  (a module import: unittest would rerun an imported class)

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "crashing_script.py")


class UserErrorE2E(base.RecoveryE2E):
    # Only this file's test (the inherited fault tests run in e2e_recovery_pytorch).
    test_node_loss_uses_a_spare_and_resumes_from_last_known_good = None
    test_stopped_rank_is_the_hang_culprit_and_training_resumes = None
    test_corrupted_replica_is_named_its_node_replaced_and_bad_checkpoints_skipped = None
    test_rank_stuck_in_cpu_code_is_the_root_culprit_and_the_job_resumes_on_its_nodes = None
    test_per_collective_reports_still_name_the_rank_stuck_in_cpu_code = None
    test_two_replica_mismatch_is_replayed_and_found_transient = None

    def test_the_same_exception_on_every_attempt_fails_the_job_without_blaming_a_node(self):
        job = self.submit(command=[base.PYTHON, SCRIPT])
        final = self.c.wait_for(
            lambda: (lambda j: j if j["state"] in ("failed", "succeeded", "cancelled") else None)(
                self.c.api("GET", "/v1/jobs/" + job)), 120, "the job to end")
        findings = self.c.api("GET", "/v1/jobs/%s/failures" % job)["failures"]
        self.assertEqual(final["state"], "failed", findings)
        exits = [f for f in findings if f["kind"] == "process_exit"]
        self.assertEqual([(f["attempt"], f["ranks"], f["exit_code"]) for f in exits],
                         [(1, [0], 1), (2, [0], 1), (3, [0], 1)], findings)
        self.assertEqual([f["nodes"] for f in exits[:2]], [["n0"], ["n0"]])
        self.assertNotEqual(exits[2]["nodes"], ["n0"], "attempt 3 left the node without blaming it")
        for f in exits:
            self.assertIn("ValueError: bad sample 3 in shard 0", f["log_tail"], f)
            self.assertIn("Traceback (most recent call last)", f["log_tail"], f)
        self.assertTrue(any("deterministic crash" in a for a in exits[2]["actions"]), exits[2])
        for f in findings:
            self.assertFalse([a for a in f["actions"] if a.startswith(("cordon", "fail n", "fail sp"))], f)
        for node in self.c.api("GET", "/v1/nodes")["nodes"]:
            self.assertTrue(node["schedulable"] and not node["failed"], node)


if __name__ == "__main__":
    unittest.main(verbosity=2)
