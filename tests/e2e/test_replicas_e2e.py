"""Replicas over etcd, end to end with real processes on loopback: three etcd members, three real shepherdd
replicas (port 0, port files) over real HTTP. One leader is elected and followers redirect writes and
live-state reads to it (reads of durable state they serve themselves); a leader
killed with SIGKILL under a write storm is replaced within 10 s with no acknowledged write lost; a leader
stopped (SIGSTOP) past its lease writes nothing when it resumes and rejoins as a follower; while etcd has no
quorum nobody leads or acts, and writes work again once it returns. Every wait has a deadline.
"""
import base64
import os
import signal
import subprocess
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from replicas import SHEPHERDD, EtcdCluster, Replicas, metric, request, wait_for  # noqa: E402

PYTHON = sys.executable


def job_spec(name):
    return {
        "name": name,
        "model": {"parameters": 1e6, "layers": 2, "hidden": 64, "heads": 4, "seq_len": 64, "vocab": 1000},
        "training": {"global_batch_size": 8, "micro_batch_size": 1},
        "parallelism": {"tp": 1, "pp": 1, "dp": 2, "zero_stage": 0},
        "resources": {"gpus": 2, "gpus_per_node": 2, "gpu_memory_gib": 80},
        "command": [PYTHON, "-c", "pass"],
    }


class ReplicasE2E(unittest.TestCase):
    TTL_S = 2

    def setUp(self):
        self.etcd = EtcdCluster()
        self.addCleanup(self.etcd.close)
        self.r = Replicas(self.etcd, n=3, ttl_s=self.TTL_S)
        self.addCleanup(self.r.close)
        # Jobs are admitted against the inventory: one node (with no agent: jobs are accepted, none runs).
        self.r.wait_leader()
        status, out = self.r.call("POST", "/v1/nodes", {"id": "n0", "gpus": 2,
                                                        "topology": {"spine": "s0", "leaf": "l0"}})
        self.assertEqual(status, 201, out)

    def followers(self, leader):
        return [i for i in range(3) if i != leader]

    def test_one_leader_and_followers_redirect_reads_and_writes(self):
        leader = self.r.wait_leader()
        for f in self.followers(leader):
            # A follower learns the leader from the leader key within a poll (TTL/4).
            status, _, body = wait_for(lambda: (lambda a: a if a[2].get("leader") else None)(self.r.readyz(f)),
                                       10, "follower %d to name the leader" % f)
            self.assertEqual(status, 503)
            self.assertEqual(body["role"], "follower")
            self.assertFalse(body["ready"])
            self.assertEqual(body["leader"], self.r.url(leader))
            status, _, text = request(self.r.url(f), "GET", "/metrics")
            self.assertEqual(status, 200)
            self.assertEqual(metric(text, "shepherd_leader"), 0)
            self.assertEqual(metric(text, "shepherd_store_up"), 1)
            # A write through the follower: 307 to the leader's URL plus the same target.
            status, hdrs, _ = request(self.r.url(f), "POST", "/v1/jobs", job_spec("through-%d" % f))
            self.assertEqual(status, 307)
            self.assertEqual(hdrs["location"], self.r.url(leader) + "/v1/jobs")
            # A read of durable state is the follower's own (tests/e2e/test_follower_reads_e2e.py); a read of
            # live state goes to the leader.
            status, hdrs, _ = request(self.r.url(f), "GET", "/v1/jobs?state=queued")
            self.assertEqual((status, hdrs.get("shepherd-served-by")), (200, "follower"))
            status, hdrs, _ = request(self.r.url(f), "GET", "/v1/jobs/job-000001/health?x=1")
            self.assertEqual(status, 307)
            self.assertEqual(hdrs["location"], self.r.url(leader) + "/v1/jobs/job-000001/health?x=1")
        status, _, body = self.r.readyz(leader)
        self.assertEqual((status, body.get("role")), (200, "leader"))
        status, _, text = request(self.r.url(leader), "GET", "/metrics")
        self.assertEqual(metric(text, "shepherd_leader"), 1)
        self.assertEqual(metric(text, "shepherd_leader_changes_total"), 1)
        # A client that follows redirects submits through a follower and reads through the other.
        f0, f1 = self.followers(leader)
        status, job = self.r.call("POST", "/v1/jobs", job_spec("redirected"), first=f0)
        self.assertEqual(status, 201, job)
        # The other follower serves the read from its view, which has the job within its age bound (1 s).
        status, got = wait_for(lambda: (lambda a: a if a[0] == 200 else None)(
            self.r.call("GET", "/v1/jobs/" + job["id"], first=f1)), 6, "the job on the other follower")
        self.assertEqual((status, got["spec"]["name"] if "spec" in got else got.get("name")), (200, "redirected"))
        # The job is in etcd under the prefix (the leader's store is the replicated one).
        kvs, _ = self.etcd.range_prefix(self.r.prefix + "/")
        self.assertTrue(any(job["id"].encode() in v or job["id"] in k for k, v, _, _ in kvs))

    def test_leader_killed_under_writes_is_replaced_within_10s_and_no_acknowledged_write_is_lost(self):
        leader = self.r.wait_leader()
        acked = []  # (job id, time sent, time acknowledged)
        nodes = []
        stop = threading.Event()
        errors = []

        def submit(worker):
            n = 0
            while not stop.is_set():
                n += 1
                try:
                    sent = time.monotonic()
                    status, job = self.r.call("POST", "/v1/jobs", job_spec("w%d-%d" % (worker, n)), timeout=30,
                                              first=worker)
                    if status == 201:
                        acked.append((job["id"], sent, time.monotonic()))
                    else:
                        errors.append((status, job))
                    node = "w%d-n%d" % (worker, n)
                    status, _ = self.r.call("POST", "/v1/nodes", {"id": node, "gpus": 2,
                                                                  "topology": {"spine": "s0", "leaf": "l0"}},
                                            timeout=30, first=worker)
                    if status in (200, 201):
                        nodes.append(node)
                except AssertionError as e:
                    errors.append(str(e))
        threads = [threading.Thread(target=submit, args=(w,)) for w in range(3)]
        for t in threads:
            t.start()
        try:
            wait_for(lambda: len(acked) >= 20, 60, "writes acknowledged before the kill")
            killed_at = time.monotonic()
            self.r.kill(leader)
            before = [j for j, _, t in acked if t < killed_at]
            # The first write sent after the kill and acknowledged (so by the new leader).
            first_after = wait_for(lambda: next((t for _, s, t in acked if s > killed_at), None), 30,
                                   "a write acknowledged by the new leader")
            wait_for(lambda: len(acked) >= len(before) + 20, 60, "writes after the failover")
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=60)
        self.assertEqual(errors, [])
        failover = first_after - killed_at
        print("failover %.2f s; %d writes acknowledged before the kill, %d in all" % (failover, len(before), len(acked)))
        self.assertLess(failover, 10, "the new leader accepted its first write %.1f s after the kill" % failover)
        new_leader = self.r.wait_leader()
        self.assertNotEqual(new_leader, leader)
        status, _, text = request(self.r.url(new_leader), "GET", "/metrics")
        self.assertEqual(metric(text, "shepherd_leader"), 1)
        # Every acknowledged write, before and after the kill, is readable from the new leader.
        lost = [j for j, _, _ in acked if request(self.r.url(new_leader), "GET", "/v1/jobs/" + j)[0] != 200]
        self.assertEqual(lost, [], "acknowledged jobs lost (%d acknowledged before the kill)" % len(before))
        lost_nodes = [n for n in nodes if request(self.r.url(new_leader), "GET", "/v1/nodes/" + n)[0] != 200]
        self.assertEqual(lost_nodes, [])
        # The killed replica comes back on its port as a follower.
        self.r.start(leader)
        status, _, body = wait_for(lambda: (lambda a: a if a and a[2].get("leader") else None)(self.r.readyz(leader)),
                                   20, "the restarted replica to follow")
        self.assertEqual((status, body["role"], body["leader"]), (503, "follower", self.r.url(new_leader)))

    def test_leader_stopped_past_its_lease_writes_nothing_when_resumed_and_rejoins_as_follower(self):
        leader = self.r.wait_leader()
        status, job = self.r.call("POST", "/v1/jobs", job_spec("before-stop"))
        self.assertEqual(status, 201, job)
        self.r.kill(leader, signal.SIGSTOP)
        stopped_at = time.monotonic()
        # Requests that reach the stopped leader wait in its socket; it sees them only after SIGCONT.
        answers = []

        def stale_write(n):
            try:
                answers.append(request(self.r.url(leader), "POST", "/v1/jobs", job_spec("stale-%d" % n),
                                       timeout=90)[0])
            except OSError as e:
                answers.append(str(e))
        writers = [threading.Thread(target=stale_write, args=(n,)) for n in range(4)]
        for t in writers:
            t.start()
        new_leader = self.r.wait_leader(timeout=30)
        self.assertNotEqual(new_leader, leader)
        kvs, _ = self.etcd.range_prefix(self.r.prefix + "/leader")
        self.assertEqual(len(kvs), 1)
        elected_at_revision = kvs[0][2]
        status, job = self.r.call("POST", "/v1/jobs", job_spec("new-leader"), first=new_leader)
        self.assertEqual(status, 201, job)
        time.sleep(max(0.0, 30 - (time.monotonic() - stopped_at)))  # the stall itself: 30 s stopped
        _, revision_at_resume = self.etcd.range_prefix(self.r.prefix + "/leader")
        self.r.kill(leader, signal.SIGCONT)
        # It rejoins as a follower naming the new leader.
        status, _, body = wait_for(
            lambda: (lambda a: a if a and a[2].get("role") == "follower" and a[2].get("leader") else None)(
                self.r.readyz(leader)), 20, "the resumed replica to follow")
        self.assertEqual(body["leader"], self.r.url(new_leader))
        for t in writers:
            t.join(timeout=100)
        self.assertEqual(len(answers), 4)
        self.assertFalse([a for a in answers if isinstance(a, int) and 200 <= a < 300], answers)
        # In etcd: no stale job landed, and nothing was written after the resume: the new leader is quiet
        # (no agents, no job that runs), so any key changed since then would be the old replica's.
        kvs, _ = self.etcd.range_prefix(self.r.prefix + "/")
        self.assertFalse([k for k, v, _, _ in kvs if b"stale-" in v], "a stale write landed")
        self.assertTrue([k for k, v, _, _ in kvs if b"new-leader" in v])
        late = [(k, m) for k, v, _, m in kvs if m > revision_at_resume]
        self.assertEqual(late, [], "keys written after the stopped leader resumed")
        self.assertGreater(revision_at_resume, elected_at_revision)
        status, _, text = request(self.r.url(leader), "GET", "/metrics")
        self.assertEqual(metric(text, "shepherd_leader"), 0)

    def test_a_leader_whose_key_is_taken_away_steps_down_and_a_new_term_serves_writes(self):
        leader = self.r.wait_leader()
        kvs, _ = self.etcd.range_prefix(self.r.prefix + "/leader")
        first_term = kvs[0][2]
        # The key deleted behind the leader's back (as an operator's etcdctl del would): its renewals still
        # work, but the key is not its own any more; it steps down and a new term begins under a new key.
        key = base64.b64encode((self.r.prefix + "/leader").encode()).decode()
        self.assertIsNotNone(self.etcd._gateway("/v3/kv/deleterange", {"key": key}))
        wait_for(lambda: (lambda k: k and k[0][2] != first_term)(self.etcd.range_prefix(self.r.prefix + "/leader")[0]),
                 20, "a new term")
        wait_for(lambda: "leadership lost" in self.r.log(leader), 20, "the old term to end")
        new_leader = self.r.wait_leader(timeout=20)
        status, job = self.r.call("POST", "/v1/jobs", job_spec("new-term"))
        self.assertEqual(status, 201, job)
        status, _, text = request(self.r.url(new_leader), "GET", "/metrics")
        self.assertEqual(metric(text, "shepherd_leader"), 1)

    def test_etcd_without_quorum_stops_every_action_and_writes_resume_when_it_returns(self):
        leader = self.r.wait_leader()
        status, job = self.r.call("POST", "/v1/jobs", job_spec("before-outage"))
        self.assertEqual(status, 201, job)
        _, revision_before = self.etcd.range_prefix(self.r.prefix + "/")
        self.etcd.pause(1)
        self.etcd.pause(2)
        paused_at = time.monotonic()
        try:
            # Within the lease's TTL (plus a renewal's timeout) nobody leads, and every replica says why.
            def all_say_no_quorum():
                for i in range(3):
                    a = self.r.readyz(i)
                    if not a or a[0] != 503 or a[2].get("store") != "no quorum":
                        return False
                return True
            wait_for(all_say_no_quorum, 20, "every replica to report no quorum")
            for i in range(3):
                status, _, text = request(self.r.url(i), "GET", "/metrics")
                self.assertEqual((metric(text, "shepherd_leader"), metric(text, "shepherd_store_up")), (0, 0))
                status, hdrs, _ = request(self.r.url(i), "POST", "/v1/jobs", job_spec("during-outage"))
                self.assertEqual((status, hdrs.get("retry-after")), (503, "1"))
            time.sleep(max(0.0, 30 - (time.monotonic() - paused_at)))  # the outage itself: 30 s
            self.assertIsNone(self.r.leader())
        finally:
            self.etcd.resume(1)
            self.etcd.resume(2)
        self.r.wait_leader(timeout=30)
        status, job2 = self.r.call("POST", "/v1/jobs", job_spec("after-outage"), timeout=30)
        self.assertEqual(status, 201, job2)
        status, got = self.r.call("GET", "/v1/jobs/" + job["id"])
        self.assertEqual(status, 200)
        status, failures = self.r.call("GET", "/v1/failures")
        self.assertEqual((status, failures.get("failures")), (200, []))
        kvs, _ = self.etcd.range_prefix(self.r.prefix + "/")
        self.assertFalse([k for k, v, _, _ in kvs if b"during-outage" in v])
        del leader, revision_before


class ReplicaFlagsE2E(unittest.TestCase):
    def test_a_leader_ttl_under_two_seconds_is_refused_by_name(self):
        p = subprocess.run([SHEPHERDD, "--store", "etcd://127.0.0.1:1", "--leader-ttl-s", "1"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--leader-ttl-s 1", p.stderr)


if __name__ == "__main__":
    unittest.main()
