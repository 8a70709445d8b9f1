"""The rank client against several daemon replicas (SHEPHERD_URL=url1,url2,...): a dead one, a follower that
redirects to the leader, one that knows no leader (503), a redirect loop. Reports that matter are kept and
resent in order until a replica accepts them. Standard library only."""

import os
import socket
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from fake_server import FakeDaemon  # noqa: E402
from shepherd_client import ShepherdClient  # noqa: E402
from shepherd_client import transport  # noqa: E402
from shepherd_client.config import config_from_env  # noqa: E402
from shepherd_client.sender import ReportSender  # noqa: E402

PATH = "/v1/jobs/job-000001/reports"


def env_for(url, **extra):
    env = {"SHEPHERD_URL": url, "SHEPHERD_JOB": "job-000001", "SHEPHERD_ATTEMPT": "2", "RANK": "5",
           "WORLD_SIZE": "8", "SHEPHERD_TOKEN": "rank-token"}
    env.update(extra)
    return env


def dead_url():
    """A replica that refuses connections: a fake daemon that has been closed."""
    d = FakeDaemon()
    d.close()
    return d.url


def kinds_and_steps(reports):
    return [(r["kind"], r.get("step")) for r in reports if r["kind"] not in ("heartbeat", "summary")]


class Replicas(unittest.TestCase):
    def daemon(self):
        d = FakeDaemon()
        self.addCleanup(d.close)
        return d

    def client(self, url, **extra):
        c = ShepherdClient.from_env(env_for(url, **extra), start=False)
        self.addCleanup(c.close, False)
        return c


class ConfigTest(Replicas):
    def test_several_urls_are_normalized_and_one_stays_valid(self):
        cfg = config_from_env({"SHEPHERD_URL": " http://a:1/ , http://b:2,,http://a:1 "})
        self.assertEqual(cfg.url, "http://a:1,http://b:2")
        self.assertEqual(config_from_env({"SHEPHERD_URL": "http://a:1/"}).url, "http://a:1")
        self.assertIsNone(config_from_env({"SHEPHERD_URL": " , "}).url)
        self.assertEqual(transport.reports_url("http://a:1,http://b:2", "job-1"),
                         "http://a:1/v1/jobs/job-1/reports,http://b:2/v1/jobs/job-1/reports")
        self.assertEqual(transport.reports_url("http://a:1", "", "77"), "http://a:1/v1/external/slurm/77/reports")


class FailoverTest(Replicas):
    def test_first_replica_dead_the_second_answers_and_stays_first(self):
        live = self.daemon()
        c = self.client(dead_url() + "," + live.url)
        c.checkpoint_saved(100, "/ckpt/100")
        self.assertTrue(c.flush())
        self.assertEqual(kinds_and_steps(live.reports()), [("checkpoint", 100)])
        self.assertEqual(live.posts[0]["headers"].get("Authorization"), "Bearer rank-token")
        # The next POST goes straight to the replica that answered (one POST, no second attempt needed).
        c.step(101, 1.0)
        self.assertTrue(c.flush())
        self.assertEqual(len(live.posts), 2)

    def test_a_follower_redirects_a_post_to_the_leader_with_its_body(self):
        leader, follower = self.daemon(), self.daemon()
        follower.redirect_to = leader.url
        c = self.client(follower.url)  # the leader is not listed: learned from the redirect
        c.step(7, 2.5)
        c.checkpoint_saved(7, "/ckpt/7")
        self.assertTrue(c.flush())
        self.assertEqual(len(follower.posts), 1)
        self.assertEqual(follower.posts[0]["status"], 307)
        self.assertEqual(leader.posts[0]["path"], PATH)
        self.assertEqual(leader.posts[0]["body"], follower.posts[0]["body"])  # the same POST, body intact
        self.assertEqual(kinds_and_steps(leader.reports()), [("step", 7), ("checkpoint", 7)])
        c.step(8, 2.4)
        self.assertTrue(c.flush())
        self.assertEqual(len(follower.posts), 1, "the leader is asked directly once known")
        self.assertEqual(kinds_and_steps(leader.reports())[-1], ("step", 8))
        # 308 too.
        other = self.daemon()
        follower.redirect_to, follower.redirect_status = other.url, 308
        leader.close()
        c.step(9, 2.3)
        self.assertTrue(c.flush())
        self.assertEqual(kinds_and_steps(other.reports()), [("step", 9)])

    def test_a_follower_without_leader_is_skipped(self):
        follower, leader = self.daemon(), self.daemon()
        follower.status = 503
        c = self.client(follower.url + "," + leader.url)
        c.checkpoint_saved(5, "/ckpt/5")
        self.assertTrue(c.flush())
        self.assertEqual(kinds_and_steps(leader.reports()), [("checkpoint", 5)])
        self.assertEqual(len(follower.posts), 1)

    def test_a_redirect_loop_stops_after_two_hops_and_keeps_the_reports(self):
        a, b = self.daemon(), self.daemon()
        a.redirect_to, b.redirect_to = b.url, a.url
        r = transport.post_reports(a.url + PATH + "," + b.url + PATH, [{"kind": "step"}], token="t")
        self.assertFalse(r.ok)
        self.assertTrue(r.retry, "a loop is transient: the batch is kept")
        self.assertIn("more than 2 redirects", r.detail)
        self.assertEqual(len(a.posts) + len(b.posts), 3)  # the first POST and two hops

    def test_every_replica_down_names_each_and_keeps_the_batch(self):
        d1, d2 = dead_url(), dead_url()
        r = transport.post_reports(d1 + PATH + "," + d2 + PATH, [{"kind": "checkpoint", "step": 1}], timeout_s=5)
        self.assertFalse(r.ok)
        self.assertTrue(r.retry)
        self.assertIn("no daemon answered", r.detail)
        self.assertIn(d1 + PATH + ":", r.detail)
        self.assertIn(d2 + PATH + ":", r.detail)

    def test_a_stalled_replica_costs_one_post_its_budget_then_the_next_one_is_asked_first(self):
        stalled = socket.socket()  # accepts connections (the kernel's backlog), never answers: SIGSTOPped
        stalled.bind(("127.0.0.1", 0))
        stalled.listen(8)
        self.addCleanup(stalled.close)
        live = self.daemon()
        c = self.client("http://127.0.0.1:%d,%s" % (stalled.getsockname()[1], live.url),
                        SHEPHERD_HTTP_TIMEOUT="0.5")
        c.checkpoint_saved(3, "/ckpt/3")
        t0 = time.monotonic()
        self.assertFalse(c.flush(), "the stalled replica took the whole budget: kept for later")
        self.assertLess(time.monotonic() - t0, 5.0)
        self.assertEqual(live.posts, [])
        self.assertTrue(c.flush())  # the next POST starts with the replica after the stalled one
        self.assertEqual(kinds_and_steps(live.reports()), [("checkpoint", 3)])

    def test_reports_survive_a_failover_in_order(self):
        # Replica a leads; it dies; b knows no leader for a while (503), then leads. Nothing that mattered
        # is lost or reordered; nothing is delivered twice.
        a, b = self.daemon(), self.daemon()
        b.status = 503
        c = self.client(a.url + "," + b.url, SHEPHERD_HTTP_TIMEOUT="5")
        c.step(1, 1.0)
        c.checkpoint_saved(1, "/ckpt/1")
        self.assertTrue(c.flush())
        a.close()
        for s in range(2, 6):
            c.step(s, 1.0)
            c.checkpoint_saved(s, "/ckpt/%d" % s)
            self.assertFalse(c.flush(), "no replica accepts: kept")
        c.finished(5)  # flushes itself; still nobody accepts
        self.assertGreaterEqual(c._sender.pending(), 9)
        b.status = 202  # b leads now
        self.assertTrue(c.flush())
        delivered = kinds_and_steps(a.reports()) + kinds_and_steps(b.reports())
        expected = [("step", 1), ("checkpoint", 1)]
        for s in range(2, 6):
            expected += [("step", s), ("checkpoint", s)]
        expected.append(("finished", 5))
        self.assertEqual(delivered, expected)
        self.assertEqual(c.stats["dropped"], 0)


class BufferTest(unittest.TestCase):
    def test_a_full_buffer_drops_other_reports_before_must_deliver_ones(self):
        posted = []

        def post(url, reports, **kw):
            posted.extend(reports)
            return transport.PostResult(True, False)

        s = ReportSender("http://unused", max_buffer=3, post=post)
        s.enqueue({"kind": "checkpoint", "step": 1})
        for i in range(5):
            s.enqueue({"kind": "step", "step": i})
        s.enqueue({"kind": "finished", "step": 4})
        self.assertTrue(s.flush())
        self.assertEqual([(r["kind"], r["step"]) for r in posted],
                         [("checkpoint", 1), ("step", 4), ("finished", 4)])
        self.assertEqual(s.stats["dropped"], 4)
        # Nothing but must-deliver reports: the oldest go, so memory stays bounded.
        posted.clear()
        for i in range(5):
            s.enqueue({"kind": "checkpoint", "step": i})
        self.assertTrue(s.flush())
        self.assertEqual([r["step"] for r in posted], [2, 3, 4])


if __name__ == "__main__":
    unittest.main()
