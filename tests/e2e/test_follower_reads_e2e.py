"""Follower reads, end to end with real processes on loopback: three etcd members, two real shepherdd replicas
with tokens. A follower serves the read routes of durable state from its view of etcd (no older than
follower_read_max_age_s), with the leader's JSON and auth, marked Shepherd-Served-By: follower; writes and
live-state routes still get 307; with etcd unreadable it answers 503, never an older view; a replica
started with --follower-read-max-age-s 0 redirects reads as before. Every wait has a deadline.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from replicas import SHEPHERDD, EtcdCluster, Replicas, free_port, metric, request, wait_for  # noqa: E402

ADMIN, VIEWER, AGENT = "admin-token-0123456789", "viewer-token-0123456789", "agent-token-0123456789"
MAX_AGE_S = 1.0


def call(url, method, path, body=None, token=ADMIN, timeout=10.0):
    """(status, headers lower-case, parsed JSON or text), as `token` (ADMIN unless told)."""
    return request(url, method, path, body, timeout=timeout, token=token)


def without_launch_since(body):
    """A launching job's `launch.since` is when the answering replica recovered the attempt (live state, as
    after a leader's restart); the rest of `launch` and every other field must be equal."""
    def strip(job):
        if isinstance(job, dict) and isinstance(job.get("launch"), dict):
            job = dict(job, launch={k: v for k, v in job["launch"].items() if k != "since"})
        return job
    if isinstance(body, dict) and isinstance(body.get("jobs"), list):
        return dict(body, jobs=[strip(j) for j in body["jobs"]])
    return strip(body)


def job_spec(name):
    return {
        "name": name,
        "model": {"parameters": 1e6, "layers": 2, "hidden": 64, "heads": 4, "seq_len": 64, "vocab": 1000},
        "training": {"global_batch_size": 8, "micro_batch_size": 1},
        "parallelism": {"tp": 1, "pp": 1, "dp": 2, "zero_stage": 0},
        "resources": {"gpus": 2, "gpus_per_node": 2, "gpu_memory_gib": 80},
        "command": [sys.executable, "-c", "pass"],
    }


class FollowerReadsE2E(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="shepherd-fr-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.tokens = os.path.join(self.tmp, "tokens.json")
        fd = os.open(self.tokens, os.O_WRONLY | os.O_CREAT, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"tokens": [{"token": ADMIN, "role": "admin", "name": "root"},
                                  {"token": VIEWER, "role": "viewer", "name": "dash"},
                                  {"token": AGENT, "role": "agent", "node": "n0"}]}, f)
        self.etcd = EtcdCluster()
        self.addCleanup(self.etcd.close)
        self.r = Replicas(self.etcd, n=2, config={"tokens_file": self.tokens,
                                                  "follower_read_max_age_s": MAX_AGE_S})
        self.addCleanup(self.r.close)
        self.leader = self.r.wait_leader()
        self.follower = 1 - self.leader
        wait_for(lambda: (self.r.readyz(self.follower) or (0, {}, {}))[2].get("leader"), 10,
                 "the follower to name the leader")
        self.lurl, self.furl = self.r.url(self.leader), self.r.url(self.follower)
        for node in ("n0", "n1"):
            status, _, out = call(self.lurl, "POST", "/v1/nodes",
                                  {"id": node, "gpus": 2, "topology": {"spine": "s0", "leaf": "l0"}})
            self.assertEqual(status, 201, out)

    maxDiff = None

    def follower_read(self, path, token=ADMIN):
        status, hdrs, out = call(self.furl, "GET", path, token=token)
        return status, hdrs, out

    def test_durable_reads_are_served_by_the_follower_with_the_leaders_json(self):
        status, _, job = call(self.lurl, "POST", "/v1/jobs", job_spec("read-me"))
        self.assertEqual(status, 201, job)
        acked = time.monotonic()
        # The job's record and the store's revision it was written at (etcd, read independently).
        kvs, _ = self.etcd.range_prefix(self.r.prefix + "/r/jobs/")
        job_rev = max(mod for k, _, _, mod in kvs if k.endswith("/" + job["id"]))
        status, _, cordoned = call(self.lurl, "PATCH", "/v1/nodes/n1", {"schedulable": False})
        self.assertEqual(status, 200, cordoned)

        # Visible on the follower within the age bound (plus a loaded machine's slack).
        got = wait_for(lambda: (lambda a: a if a[0] == 200 else None)(self.follower_read("/v1/jobs/" + job["id"])),
                       MAX_AGE_S + 5, "the job on the follower")
        self.assertLess(time.monotonic() - acked, MAX_AGE_S + 5)
        status, hdrs, body = got
        self.assertEqual(hdrs.get("shepherd-served-by"), "follower")
        self.assertGreaterEqual(int(hdrs["shepherd-read-revision"]), job_rev)
        self.assertLessEqual(float(hdrs["shepherd-read-age"]), MAX_AGE_S)
        self.assertEqual(float(hdrs["shepherd-read-max-age"]), MAX_AGE_S)

        # The cordon the leader recorded, and identical JSON for the durable routes (the state is settled:
        # no agent, the job stays queued).
        def cordon_seen():
            s, _, n = self.follower_read("/v1/nodes/n1")
            return s == 200 and n.get("schedulable") is False
        wait_for(cordon_seen, MAX_AGE_S + 5, "the cordon on the follower")
        for path in ("/v1/jobs/" + job["id"], "/v1/jobs", "/v1/nodes", "/v1/nodes/n1", "/v1/failures",
                     "/v1/jobs/" + job["id"] + "/checkpoints", "/v1/events?limit=1000"):
            ls, lh, lb = call(self.lurl, "GET", path)
            fs, fh, fb = self.follower_read(path)
            self.assertEqual((fs, without_launch_since(fb)), (ls, without_launch_since(lb)), path)
            self.assertNotIn("shepherd-served-by", lh)
            self.assertEqual(fh.get("shepherd-served-by"), "follower", path)

        # The planner answers from the follower too (it writes nothing), as the leader does.
        ls, _, lb = call(self.lurl, "POST", "/v1/plan", job_spec("plan-me"))
        fs, fh, fb = call(self.furl, "POST", "/v1/plan", job_spec("plan-me"))
        self.assertEqual((fs, fb), (ls, lb))
        self.assertEqual((fs, fh.get("shepherd-served-by")), (200, "follower"))

        # Writes, live-state reads and long polls still go to the leader.
        for method, path, body in (("POST", "/v1/jobs", job_spec("via-follower")),
                                   ("PATCH", "/v1/nodes/n0", {"schedulable": False}),
                                   ("GET", "/v1/jobs/" + job["id"] + "/health", None),
                                   ("GET", "/v1/events?wait=5", None)):
            status, hdrs, _ = call(self.furl, method, path, body)
            self.assertEqual(status, 307, (method, path))
            self.assertEqual(hdrs["location"], self.lurl + path)

        # The leader's auth: no token or a wrong one is 401, a role the route does not admit is 403.
        for token, want in ((None, 401), ("wrong-token-0123456789", 401), (AGENT, 403)):
            ls, _, _ = call(self.lurl, "GET", "/v1/jobs", token=token)
            fs, fh, _ = self.follower_read("/v1/jobs", token=token)
            self.assertEqual((ls, fs), (want, want), token)
            self.assertEqual(fh.get("shepherd-served-by"), "follower")
        self.assertEqual(self.follower_read("/v1/jobs", token=VIEWER)[0], 200)
        self.assertEqual(self.follower_read("/v1/nodes/n0", token=AGENT)[0], 200)  # its own node
        self.assertEqual(self.follower_read("/v1/nodes/n1", token=AGENT)[0], 403)

        # Who leads is still told by /readyz and /metrics; the reads are counted.
        status, _, ready = call(self.furl, "GET", "/readyz", token=None)
        self.assertEqual((status, ready["role"], ready["leader"], ready["serves_reads"]),
                         (503, "follower", self.lurl, True))
        _, _, text = call(self.furl, "GET", "/metrics")
        self.assertEqual(metric(text, "shepherd_leader"), 0)
        self.assertGreater(metric(text, 'shepherd_follower_reads_total{result="served"}'), 0)
        self.assertGreaterEqual(metric(text, "shepherd_follower_view_revision"), job_rev)

    def test_a_follower_that_cannot_read_etcd_answers_503_not_an_older_view(self):
        status, hdrs, _ = wait_for(lambda: (lambda a: a if a[0] == 200 else None)(self.follower_read("/v1/nodes")),
                                   MAX_AGE_S + 5, "a first follower read")
        self.assertEqual(hdrs.get("shepherd-served-by"), "follower")
        self.etcd.pause(1)
        self.etcd.pause(2)
        try:
            # Once the view is older than the bound, a read needs etcd: no quorum, so 503 (bounded).
            def refused():
                s, h, b = self.follower_read("/v1/nodes")
                self.assertIn(s, (200, 503))
                if s == 200:  # only while the view is within its bound
                    self.assertLessEqual(float(h["shepherd-read-age"]), MAX_AGE_S)
                    return None
                return s, h, b
            status, hdrs, body = wait_for(refused, 30, "the follower to refuse reads")
            self.assertEqual(hdrs.get("retry-after"), "1")
            self.assertEqual(hdrs.get("content-type"), "application/problem+json")
            self.assertIn("cannot serve reads", body["detail"])
            self.assertEqual(hdrs.get("shepherd-served-by"), "follower")
        finally:
            self.etcd.resume(1)
            self.etcd.resume(2)
        wait_for(lambda: self.follower_read("/v1/nodes")[0] == 200, 30, "follower reads once etcd is back")

    def test_sighup_on_a_follower_rereads_its_tokens_and_it_keeps_following(self):
        fresh = "fresh-viewer-token-0123456789"
        self.assertEqual(self.follower_read("/v1/jobs", token=fresh)[0], 401)
        with open(self.tokens) as f:
            tokens = json.load(f)
        tokens["tokens"].append({"token": fresh, "role": "viewer", "name": "later"})
        with open(self.tokens, "w") as f:
            json.dump(tokens, f)
        self.r.procs[self.follower].send_signal(signal.SIGHUP)
        wait_for(lambda: self.follower_read("/v1/jobs", token=fresh)[0] == 200, 15,
                 "the follower to accept the token the file gained")
        # A file that does not load keeps the tokens the follower has.
        with open(self.tokens, "w") as f:
            f.write("{not json")
        self.r.procs[self.follower].send_signal(signal.SIGHUP)
        wait_for(lambda: "SIGHUP: keeping the current tokens" in self.r.log(self.follower), 15,
                 "the follower to refuse the broken file")
        self.assertEqual(self.follower_read("/v1/jobs", token=fresh)[0], 200)
        self.assertIsNone(self.r.procs[self.follower].poll())
        status, _, ready = call(self.furl, "GET", "/readyz", token=None)
        self.assertEqual((status, ready["role"]), (503, "follower"))

    def test_max_age_zero_redirects_reads_as_before(self):
        port_file = os.path.join(self.tmp, "port-z")
        log = open(os.path.join(self.tmp, "z.log"), "w")
        self.addCleanup(log.close)
        p = subprocess.Popen([SHEPHERDD, "--listen", "127.0.0.1:%d" % free_port(), "--store", self.etcd.store_flag(),
                              "--store-prefix", self.r.prefix, "--replica-id", "rz", "--port-file", port_file,
                              "--config", self.r.path("config.json"), "--follower-read-max-age-s", "0"],
                             stdout=log, stderr=subprocess.STDOUT)

        def stop():
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.addCleanup(stop)

        def port():
            assert p.poll() is None, "the replica exited"
            try:
                with open(port_file) as f:
                    return int(f.read().strip() or 0)
            except (FileNotFoundError, ValueError):
                return 0
        url = "http://127.0.0.1:%d" % wait_for(port, 30, "the replica's port file")
        status, _, ready = call(url, "GET", "/readyz", token=None)
        self.assertEqual((status, ready["role"], ready["serves_reads"]), (503, "follower", False))
        for path in ("/v1/jobs", "/v1/nodes/n0"):
            status, hdrs, _ = call(url, "GET", path)
            self.assertEqual(status, 307, path)
            self.assertEqual(hdrs["location"], self.lurl + path)
            self.assertNotIn("shepherd-served-by", hdrs)


if __name__ == "__main__":
    unittest.main()
