"""Lease renewal by a follower, end to end with real processes on loopback (docs/agent-protocol.md, "Lease"):
three etcd members, two real shepherdd replicas, two real agents. Each replica is reached through a TCP
forwarder it advertises as its URL, so the test can cut one agent off the leader alone: its heartbeats fail
there, and the follower renews its lease from replicated state. Its rank runs on past several leases; once
the leader declares the node lost, the follower's answer stops the rank within S + lease of the declaration,
and the replacement on the spare starts no earlier than that. Every wait has a deadline.
"""
import calendar
import os
import socket
import struct
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from replicas import EtcdCluster, Replicas, free_port, metric, request, wait_for  # noqa: E402

PYTHON = "/usr/bin/python3"
LEASE_S = 4.0      # agent_lease_s
RENEWAL_S = 1.0    # follower_renewal_max_age_s (S)
NODE_TIMEOUT_S = 14.0  # longer than three leases: the leader declares the node lost after them
# The rank: records "<attempt> <pid> <start time>" once, then sleeps (it reports nothing).
RANK = ("import os, sys, time\n"
        "line = '%s %d %.3f\\n' % (os.environ['SHEPHERD_ATTEMPT'], os.getpid(), time.time())\n"
        "open(os.path.join(sys.argv[1], 'starts'), 'a').write(line)\n"
        "time.sleep(3600)\n")


class Forwarder:
    """A TCP forwarder on a free loopback port to `target` (set later); cut() refuses every connection from
    then on and resets those open: the path to one replica is gone while the replica runs on."""

    def __init__(self):
        self.port = free_port()
        self.target = None
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", self.port))
        self.sock.listen(64)
        self.open = []
        self.lock = threading.Lock()
        self.cut_off = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def _accept(self):
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                client.close()
                continue
            with self.lock:
                if self.cut_off:
                    client.close()
                    upstream.close()
                    return
                self.open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        with self.lock:
            self.cut_off = True
            for s in self.open + [self.sock]:
                try:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # reset
                    s.close()
                except OSError:
                    pass


def parse_time(text):
    """RFC 3339 UTC ("2026-11-29T17:00:00.123Z") -> seconds since the epoch."""
    base, _, frac = text.rstrip("Z").partition(".")
    return calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + (float("0." + frac) if frac else 0.0)


class FollowerLeaseE2E(unittest.TestCase):
    def setUp(self):
        self.etcd = EtcdCluster()
        self.addCleanup(self.etcd.close)
        self.fw = [Forwarder(), Forwarder()]
        self.r = Replicas(self.etcd, n=2, config={
            "node_heartbeat_timeout_s": NODE_TIMEOUT_S, "agent_lease_s": LEASE_S,
            "follower_read_max_age_s": RENEWAL_S, "follower_renewal_max_age_s": RENEWAL_S},
            args={i: ["--advertise-url", self.fw[i].url] for i in range(2)})
        self.addCleanup(self.r.close)
        for i in range(2):
            self.fw[i].target = self.r.ports[i]
        self.addCleanup(lambda: [f.cut() for f in self.fw])
        self.leader = self.r.wait_leader()
        self.follower = 1 - self.leader
        wait_for(lambda: (self.r.readyz(self.follower) or (0, {}, {}))[2].get("leader"), 10,
                 "the follower to name the leader")
        self.work = self.r.path("work")
        os.makedirs(self.work)

    def api(self, method, path, body=None):
        status, _, out = request(self.r.url(self.leader), method, path, body, timeout=10)
        return status, out

    def follower_metric(self, name):
        status, _, text = request(self.r.url(self.follower), "GET", "/metrics", timeout=5)
        return metric(text, name) if status == 200 else None

    def starts(self):
        try:
            with open(os.path.join(self.work, "starts")) as f:
                return [line.split() for line in f.read().splitlines()]
        except FileNotFoundError:
            return []

    def test_a_follower_renews_a_lease_the_leader_cannot_and_stops_a_lost_nodes_ranks(self):
        # n0 reaches each replica through its forwarder; the spare talks to the replicas directly.
        self.r.start_agent("n0", gpus=1, servers=[f.url for f in self.fw])
        self.r.start_agent("spare", gpus=1, spare=True)
        spec = {
            "name": "lease",
            "model": {"parameters": 1e6, "layers": 2, "hidden": 64, "heads": 4, "seq_len": 64, "vocab": 1000},
            "training": {"global_batch_size": 8, "micro_batch_size": 1},
            "parallelism": {"tp": 1, "pp": 1, "dp": 1, "zero_stage": 0},
            "resources": {"gpus": 1, "gpus_per_node": 1, "gpu_memory_gib": 80},
            "command": [PYTHON, "-c", RANK, self.work],
            "policy": {"heartbeat_timeout_s": 300, "hang_timeout_s": 300, "restart_backoff_s": 0,
                       "max_restarts": 3},
        }
        status, job = self.api("POST", "/v1/jobs", spec)
        self.assertEqual(status, 201, job)
        job = job["id"]
        first = wait_for(lambda: self.starts(), 30, "the rank to start")[0]
        self.assertEqual(first[0], "1")
        pid = int(first[1])
        self.assertEqual(self.r.rank_processes("n0"), {0: pid}, "the rank runs on n0, not on the spare")
        wait_for(lambda: self.api("GET", "/v1/jobs/" + job)[1]["state"] == "running", 30,
                 "the leader to hear the rank started")

        # Cut n0 off the leader: its heartbeats fail there (and the follower's redirect leads there too).
        self.fw[self.leader].cut()
        cut = time.time()
        # Past three leases, on the follower's renewals alone: the same rank process, the same attempt.
        wait_for(lambda: time.time() > cut + 3 * LEASE_S, 3 * LEASE_S + 5, "three leases")
        os.kill(pid, 0)  # raises if the rank was stopped
        self.assertEqual(len(self.starts()), 1)
        status, view = self.api("GET", "/v1/jobs/" + job)
        self.assertEqual((status, view["attempt"], view["state"]), (200, 1, "running"), view)
        renewed = self.follower_metric('shepherd_follower_lease_renewals_total{result="renewed"}')
        self.assertGreaterEqual(renewed, 3 * LEASE_S / 0.5 / 2, "renewals every heartbeat (0.5 s)")

        # The leader declares n0 lost (it has not heard it for the node timeout).
        def lost():
            status, out = self.api("GET", "/v1/jobs/%s/failures" % job)
            return status == 200 and [f for f in out["failures"] if f["kind"] == "node_lost"]
        declared = parse_time(wait_for(lost, NODE_TIMEOUT_S + 20, "node_lost")[0]["detected_at"])

        def gone():
            try:
                os.kill(pid, 0)
                return None
            except ProcessLookupError:
                return time.time()
        stopped = wait_for(gone, RENEWAL_S + LEASE_S + 10, "the lost node's rank to stop", interval=0.05)
        replaced = wait_for(lambda: [s for s in self.starts() if s[0] != "1"], 60, "the replacement")[0]
        started = float(replaced[2])
        print("E2E-TIMING follower_lease cut_to_lost_s=%.1f rank_stopped_after_lost_s=%.2f "
              "replacement_after_lost_s=%.2f renewals=%d" % (declared - cut, stopped - declared,
                                                             started - declared, renewed))
        self.assertLessEqual(stopped - declared, RENEWAL_S + LEASE_S, "stopped within S + lease")
        with open(self.r.path("agent-n0.log")) as f:
            self.assertIn("the daemon declared this node lost", f.read(),
                          "stopped by the follower's node_lost answer, not by the lease running out")
        self.assertGreaterEqual(started - declared, RENEWAL_S + LEASE_S - 0.01,
                                "the replacement waits S + lease after the declaration")
        self.assertGreater(started, stopped, "no overlap")
        self.assertEqual(self.r.rank_processes("spare"), {0: int(replaced[1])})
        self.assertGreaterEqual(self.follower_metric('shepherd_follower_lease_renewals_total{result="stopped"}'), 1)


if __name__ == "__main__":
    unittest.main()
