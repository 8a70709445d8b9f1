"""Training outlives the control plane, end to end: three etcd members, three shepherdd replicas, real agents
(`shepherdd agent --server URL1,URL2,URL3`) and a real 4-rank PyTorch DDP job (gloo, CPU) whose ranks get
every replica's URL. A rolling restart of every replica stops no rank (same pids, same attempt, steps go
on); a leader killed with SIGKILL during the job stops no rank either; a node killed right after that
failover is found and replaced by the new leader, and a leader killed in the middle of that recovery does
not stop it: training resumes in a later attempt without the node. Every wait has a deadline.
"""
import os
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from replicas import EtcdCluster, Replicas, wait_for  # noqa: E402
import test_recovery_e2e as recovery  # noqa: E402  (job_spec and the torch interpreter)


class ReplicasDdpE2E(unittest.TestCase):
    def setUp(self):
        self.etcd = EtcdCluster()
        self.addCleanup(self.etcd.close)
        # agent_lease_s far above any outage here: only a node declared lost stops its ranks. The default
        # node_heartbeat_timeout_s (10 s): an agent whose call hangs on a stalled replica loses one request's
        # budget (5 s) before it tries the next, which a shorter timeout would call a lost node.
        self.r = Replicas(self.etcd, n=3, ttl_s=2, config={"agent_lease_s": 120, "node_heartbeat_timeout_s": 10})
        self.addCleanup(self.r.close)
        self.r.wait_leader()
        self.r.start_agent("n0", topology="spine=s0,leaf=l0")
        self.r.start_agent("n1", topology="spine=s0,leaf=l0")
        self.r.start_agent("sp0", topology="spine=s0,leaf=l0", spare=True)
        self.r.start_agent("sp1", topology="spine=s0,leaf=l1", spare=True)

    # ---- helpers (every call follows leadership)
    def get(self, path):
        status, out = self.r.call("GET", path, timeout=30)
        self.assertEqual(status, 200, (path, out))
        return out

    def submit(self):
        spec = recovery.job_spec(self.r.path("ckpt"))
        status, job = self.r.call("POST", "/v1/jobs", spec, timeout=30)
        self.assertEqual(status, 201, job)
        wait_for(lambda: self.get("/v1/jobs/" + job["id"])["state"] == "running", 90,
                 "the agents to start the job's ranks")
        return job["id"]

    def step(self, job):
        return self.get("/v1/jobs/%s/health" % job).get("checks", {}).get("hang", {}).get("job_step", -1)

    def attempt(self, job):
        return (self.get("/v1/jobs/" + job).get("current_attempt") or {}).get("number")

    def ranks(self):
        return {n: self.r.rank_processes(n) for n in ("n0", "n1")}

    def failures(self, job):
        return self.get("/v1/jobs/%s/failures" % job)["failures"]

    def assert_training_goes_on(self, job, ranks, attempt, what):
        s0 = self.step(job)
        wait_for(lambda: self.step(job) >= s0 + 5, 120, "steps to advance after %s" % what, interval=0.5)
        self.assertEqual(self.ranks(), ranks, "rank processes changed after %s" % what)
        self.assertEqual(self.attempt(job), attempt, "a new attempt after %s" % what)
        self.assertEqual(self.failures(job), [], "findings after %s" % what)

    # ---- the control-plane events
    def test_rolling_restart_of_every_replica_stops_no_rank(self):
        job = self.submit()
        wait_for(lambda: self.step(job) >= 5, 180, "step 5", interval=0.5)
        ranks, attempt = self.ranks(), self.attempt(job)
        self.assertEqual(sorted(r for n in ranks.values() for r in n), [0, 1, 2, 3])
        for i in range(3):
            self.r.procs[i].send_signal(signal.SIGTERM)
            self.assertEqual(self.r.procs[i].wait(timeout=60), 0, self.r.log(i))
            self.r.start(i)
            self.r.wait_leader(timeout=30)
        self.assert_training_goes_on(job, ranks, attempt, "a rolling restart")

    def test_leader_stopped_30s_then_resumed_stops_no_rank_and_follows(self):
        job = self.submit()
        wait_for(lambda: self.step(job) >= 5, 180, "step 5", interval=0.5)
        ranks, attempt = self.ranks(), self.attempt(job)
        leader = self.r.wait_leader()
        self.r.kill(leader, signal.SIGSTOP)
        stopped_at = time.monotonic()
        try:
            new_leader = self.r.wait_leader(timeout=30)
            self.assertNotEqual(new_leader, leader)
            time.sleep(max(0.0, 30 - (time.monotonic() - stopped_at)))  # the stall itself: 30 s
        finally:
            self.r.kill(leader, signal.SIGCONT)
        wait_for(lambda: (lambda a: a and a[2].get("role") == "follower")(self.r.readyz(leader)), 20,
                 "the resumed replica to follow")
        self.assertEqual(self.r.leader(), new_leader)
        self.assert_training_goes_on(job, ranks, attempt, "the leader's 30 s stall")

    def test_etcd_without_quorum_for_30s_stops_no_rank_and_takes_no_action(self):
        job = self.submit()
        wait_for(lambda: self.step(job) >= 5, 180, "step 5", interval=0.5)
        ranks, attempt = self.ranks(), self.attempt(job)
        self.etcd.pause(1)
        self.etcd.pause(2)
        paused_at = time.monotonic()
        try:
            wait_for(lambda: all((lambda a: a and a[2].get("store") == "no quorum")(self.r.readyz(i))
                                 for i in range(3)), 20, "every replica to report no quorum")
            time.sleep(max(0.0, 30 - (time.monotonic() - paused_at)))  # the outage itself: 30 s
            self.assertIsNone(self.r.leader())
        finally:
            self.etcd.resume(1)
            self.etcd.resume(2)
        self.r.wait_leader(timeout=30)
        self.assert_training_goes_on(job, ranks, attempt, "30 s without an etcd quorum")

    def test_leader_killed_during_the_job_and_during_a_recovery(self):
        job = self.submit()
        wait_for(lambda: self.step(job) >= 10, 180, "step 10", interval=0.5)
        ranks, attempt = self.ranks(), self.attempt(job)
        leader = self.r.wait_leader()
        killed_at = time.monotonic()
        self.r.kill(leader)
        new_leader = self.r.wait_leader(timeout=30)
        self.assertLess(time.monotonic() - killed_at, 10, "another replica leads within 10 s")
        self.assertNotEqual(new_leader, leader)
        self.assert_training_goes_on(job, ranks, attempt, "the leader's kill -9")
        self.r.start(leader)
        # A node killed right after the failover: the new leader finds it and replaces it.
        t0 = time.monotonic()
        self.r.kill_node("n1")
        finding = wait_for(lambda: next((f for f in self.failures(job) if f["kind"] == "node_lost"), None), 90,
                           "the node's loss found")
        self.assertEqual(finding["nodes"], ["n1"])
        # ... and the leader is killed again in the middle of that recovery (the job not yet running again).
        during = self.get("/v1/jobs/" + job)
        self.assertFalse(during["state"] == "running" and (during.get("current_attempt") or {}).get("number") != attempt,
                         "the recovery was over before the kill: %s" % during["state"])
        self.r.kill(self.r.wait_leader())
        self.r.wait_leader(timeout=30)

        def resumed():
            j = self.get("/v1/jobs/" + job)
            a = j.get("current_attempt") or {}
            if j["state"] != "running" or a.get("number", 1) <= attempt:
                return None
            h = self.get("/v1/jobs/%s/health" % job)
            if h.get("attempt") != a["number"] or self.step(job) <= a.get("resume_step", 0):
                return None
            return a
        resumed_attempt = wait_for(resumed, 240, "training resumed in a new attempt", interval=0.5)
        placement = self.get("/v1/jobs/%s/placement" % job)
        self.assertNotIn("n1", {r["node"] for r in placement["ranks"]})
        print("E2E-TIMING replicas node_loss_after_failover resumed_s=%.1f attempt=%d"
              % (time.monotonic() - t0, resumed_attempt["number"]), flush=True)


if __name__ == "__main__":
    unittest.main()
