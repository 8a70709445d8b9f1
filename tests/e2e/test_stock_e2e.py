"""End to end with a STOCK PyTorch DDP script (stock_ddp.py: no Shepherd call except reading
SHEPHERD_RESUME_CHECKPOINT) launched by the agents as `python3 -m shepherd_client.run stock_ddp.py ...`,
through the fault matrix: node SIGKILL, SIGSTOP of one rank, one rank stuck in CPU code while its peers
block inside DDP's all-reduce, one rank blocked in a long C call holding the GIL, and SDC with DP = 4.
Training resumes from last-known-good each time.

Faults come from the instrumentation's test-only hook (TEST_SHEPHERD_FAULT in the job's env, read by
shepherd_client.faults, never by the script). Every wait has a deadline; timings print as E2E-TIMING lines.
"""
import calendar
import os
import re
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import test_recovery_e2e as base  # noqa: E402  (a module import: unittest would rerun an imported class)

HERE = os.path.dirname(os.path.abspath(__file__))
STOCK = os.path.join(HERE, "stock_ddp.py")
CLIENT = os.path.abspath(os.path.join(HERE, "..", "..", "clients", "python"))
HANG_TIMEOUT_S = 6


def unix_time(rfc3339):
    m = re.match(r"(\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)(\.\d+)?Z", rfc3339)
    y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
    return calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)) + float(m.group(7) or 0)


class StockScriptE2E(base.RecoveryE2E):
    # The inherited hand-instrumented tests run in e2e_recovery_pytorch; here only the stock ones.
    test_node_loss_uses_a_spare_and_resumes_from_last_known_good = None
    test_stopped_rank_is_the_hang_culprit_and_training_resumes = None
    test_corrupted_replica_is_named_its_node_replaced_and_bad_checkpoints_skipped = None
    test_rank_stuck_in_cpu_code_is_the_root_culprit_and_the_job_resumes_on_its_nodes = None
    test_per_collective_reports_still_name_the_rank_stuck_in_cpu_code = None
    test_two_replica_mismatch_is_replayed_and_found_transient = None

    def submit_stock(self, fault=None):
        ckpt = self.c.path("ckpt")
        spec = base.job_spec(ckpt, command=[base.PYTHON, "-m", "shepherd_client.run", STOCK, "--steps", "100000",
                                       "--step-sleep", "0.1", "--ckpt-dir", ckpt, "--ckpt-every", "5"])
        spec["env"].update({"PYTHONPATH": CLIENT, "GLOO_SOCKET_IFNAME": "lo"})
        if fault:
            spec["env"]["TEST_SHEPHERD_FAULT"] = fault
        job = self.c.api("POST", "/v1/jobs", spec, expect=201)
        return job["id"]

    def fault_time(self, node, job, rank):
        """Unix time the fault hook fired, from the rank's log."""
        def find():
            m = re.search(r"shepherd test fault: \w+ after step \d+ at ([0-9.]+)", self.c.rank_log(node, job, 1, rank))
            return float(m.group(1)) if m else None
        return self.c.wait_for(find, 60, "the fault line in rank %d's log" % rank)

    def test_stock_node_sigkill(self):
        job = self.submit_stock()
        self.wait_good_checkpoint(job, 10)
        t0 = time.monotonic()
        self.assertEqual(len(self.c.kill_node("n1")), 2)
        f, detect_s = self.wait_finding(job, ("node_lost",), t0, first_attempt_only=False)
        self.assertEqual(f["nodes"], ["n1"])
        attempt, resume_s = self.wait_resumed(job, t0)
        placement = self.assert_resumed_from_good(job, attempt)
        self.assertNotIn("n1", {r["node"] for r in placement["ranks"]})
        self.timing("stock_node_loss", detect_s, resume_s)

    def test_stock_sigstop_of_one_rank(self):
        job = self.submit_stock()
        self.wait_good_checkpoint(job, 10)
        ranks = self.c.rank_processes("n1")
        victim = max(ranks)
        t0 = time.monotonic()
        os.killpg(ranks[victim], signal.SIGSTOP)  # the rank and its heartbeat helper
        f, detect_s = self.wait_finding(job, ("hang", "heartbeat_lost"), t0)
        self.assertEqual(f["ranks"], [victim], f)
        attempt, resume_s = self.wait_resumed(job, t0)
        self.assert_resumed_from_good(job, attempt)
        self.timing("stock_sigstop(%s)" % f["kind"], detect_s, resume_s)

    def stuck_rank(self, kind, name):
        job = self.submit_stock(fault="%s:3:12" % kind)
        fired = self.fault_time("n1", job, 3)
        t0 = time.monotonic()
        f, _ = self.wait_finding(job, ("hang", "heartbeat_lost", "process_exit", "node_lost"), t0)
        self.assertEqual((f["kind"], f["ranks"], f["nodes"]), ("hang", [3], ["n1"]), f)
        # Stuck, not lost. Two honest descriptions: the rank's last report shows no collective, or it still
        # shows the collective its peers completed (a GIL-holding call can start before the rank's progress
        # page records that it left the all-reduce; which one is seen depends on timing).
        self.assertRegex(f["detail"], r"heartbeating but inside no collective|"
                                      r"inside dp#\d+, which its peers completed, while they wait for it")
        self.assertNotIn("silent", f["detail"])
        self.assertNotIn("no heartbeat", f["detail"])
        detect_s = unix_time(f["detected_at"]) - fired
        self.assertLessEqual(detect_s, HANG_TIMEOUT_S + 2, f)
        attempt, resume_s = self.wait_resumed(job, t0)
        self.assert_resumed_from_good(job, attempt)
        self.timing(name, detect_s, resume_s)

    def test_stock_rank_stuck_in_cpu_code_while_peers_wait_in_ddp_allreduce(self):
        self.stuck_rank("spin", "stock_hang_cpu")

    def test_stock_rank_blocked_in_a_c_call_holding_the_gil(self):
        self.stuck_rank("gil", "stock_hang_gil")

    def test_stock_sdc_dp4(self):
        job = self.submit_stock(fault="corrupt:1:12")
        self.c.wait_for(lambda: self.job_step(job) >= 12, 180, "step 12")
        t0 = time.monotonic()
        f, detect_s = self.wait_finding(job, ("sdc_suspected",), t0)
        self.assertEqual(f["ranks"], [1], f)
        attempt, resume_s = self.wait_resumed(job, t0)
        self.assert_resumed_from_good(job, attempt)
        self.assertLessEqual(attempt["resume_step"], 10)
        self.timing("stock_sdc", detect_s, resume_s)


if __name__ == "__main__":
    unittest.main()
