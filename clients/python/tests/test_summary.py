"""The default reporting mode (SHEPHERD_COLLECTIVE_REPORTS=summary): one summary per heartbeat interval in
place of the heartbeat and every collective report; its size bound; the progress page's summary part; and the
liveness helper staying quiet while the rank's own thread delivers. Standard library only (no torch)."""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
from unittest import mock

from fake_server import FakeDaemon

PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, PKG)
from shepherd_client import ShepherdClient  # noqa: E402
from shepherd_client import client as client_mod  # noqa: E402
from shepherd_client import helper as helper_mod  # noqa: E402
from shepherd_client.config import config_from_env  # noqa: E402
from shepherd_client.progress_page import ProgressPage  # noqa: E402


def env_for(url, **extra):
    env = {"SHEPHERD_URL": url, "SHEPHERD_JOB": "job-000001", "SHEPHERD_ATTEMPT": "2", "RANK": "5",
           "WORLD_SIZE": "8", "SHEPHERD_RANK_COORDS": "1,0,2", "NODE_NAME": "n3"}
    env.update(extra)
    return env


class SummaryTest(unittest.TestCase):
    def setUp(self):
        self.d = FakeDaemon()
        self.addCleanup(self.d.close)

    def client(self, **extra):
        c = ShepherdClient.from_env(env_for(self.d.url, **extra), start=False)
        self.addCleanup(c.close, False)
        return c

    def summaries(self):
        return self.d.reports("summary")

    def test_summary_is_the_default_mode_and_the_only_collective_traffic(self):
        self.assertEqual(config_from_env({}).collective_reports, "summary")
        self.assertEqual(config_from_env({"SHEPHERD_COLLECTIVE_REPORTS": "bogus"}).collective_reports, "summary")
        self.assertEqual(config_from_env({"SHEPHERD_COLLECTIVE_REPORTS": "ALL"}).collective_reports, "all")
        c = self.client()
        c.set_step(12)
        t0 = time.time()
        for _ in range(3):
            with c.collective("allreduce", "dp"):
                time.sleep(0.01)
        gather = c.collective_begin("allgather", "tp")
        c.heartbeat()
        self.assertTrue(c.flush())
        self.assertEqual(self.d.reports("collective"), [])
        self.assertEqual(self.d.reports("heartbeat")[0]["kind"], "heartbeat")  # the fixture's view of it
        (s,) = self.summaries()
        self.assertEqual((s["rank"], s["attempt"], s["step"], s["phase"], s["node"]), (5, 2, 12, "train", "n3"))
        groups = {g["group"]: g for g in s["groups"]}
        self.assertEqual(set(groups), {"dp", "tp"})
        dp, tp = groups["dp"], groups["tp"]
        self.assertEqual((dp["completed"], dp["count"]), (2, 3))
        self.assertNotIn("open", dp)
        self.assertGreaterEqual(dp["wait_s"], 0.03)  # three waits of at least 10 ms, this process's clock
        self.assertLess(dp["wait_s"], 30)
        self.assertEqual((tp["completed"], tp["count"], tp["wait_s"]), (-1, 0, 0.0))
        self.assertEqual((tp["open"]["seq"], tp["open"]["op"]), (0, "allgather"))
        self.assertGreaterEqual(tp["open"]["since"], t0)
        self.assertTrue(all("members" not in g for g in s["groups"]))  # placed groups: never
        # The next summary counts from the previous one; the open collective is still there until it ends.
        c.heartbeat()
        c.collective_end(gather)
        c.heartbeat()
        self.assertTrue(c.flush())
        second, third = self.summaries()[1:]
        self.assertEqual({g["group"]: (g["count"], g["wait_s"]) for g in second["groups"]},
                         {"dp": (0, 0.0), "tp": (0, 0.0)})
        self.assertIn("open", {g["group"]: g for g in second["groups"]}["tp"])
        tp3 = {g["group"]: g for g in third["groups"]}["tp"]
        self.assertEqual((tp3["completed"], tp3["count"]), (0, 1))
        self.assertNotIn("open", tp3)

    def test_the_oldest_open_collective_of_a_group_is_its_open_one(self):
        c = self.client()
        first = c.collective_begin("allreduce", "dp")  # async: a second one starts before it ends
        c.collective_begin("allreduce", "dp")
        c.heartbeat()
        c.collective_end(first)
        c.heartbeat()
        self.assertTrue(c.flush())
        a, b = [{g["group"]: g for g in s["groups"]}["dp"] for s in self.summaries()]
        self.assertEqual((a["completed"], a["open"]["seq"]), (-1, 0))
        self.assertEqual((b["completed"], b["open"]["seq"]), (0, 1))

    def test_a_named_group_s_members_ride_on_its_first_summary_then_every_30_s(self):
        c = self.client()
        now = [1000.0]
        with mock.patch.object(client_mod.time, "monotonic", lambda: now[0]):
            with c.collective("allreduce", "g-9805b47f", members=[2, 0, 5]):
                pass
            c.heartbeat()
            now[0] += 29
            c.heartbeat()
            now[0] += 2
            c.heartbeat()
        self.assertTrue(c.flush())
        named = [{g["group"]: g for g in s["groups"]}["g-9805b47f"] for s in self.summaries()]
        self.assertEqual([g.get("members") for g in named], [[0, 2, 5], None, [0, 2, 5]])

    def test_size_is_bounded_by_sixteen_groups_open_ones_first(self):
        c = self.client()
        for i in range(20):
            with c.collective("allreduce", "g-%02d" % i, members=[5, 6]):
                pass
        opened = [c.collective_begin("send", "pp")]
        c.heartbeat()  # carries members: the first summary of each named group
        c.heartbeat()  # the steady state: no members
        self.assertTrue(c.flush())
        first, steady = self.summaries()
        self.assertEqual(len(steady["groups"]), 16)
        self.assertEqual(steady["groups"][0]["group"], "pp")  # open: listed first
        self.assertEqual([g["group"] for g in steady["groups"][1:]], ["g-%02d" % i for i in range(19, 4, -1)])
        # Stated bound (summary.py): about 120 bytes + 110 per group, as sent (compact JSON, no members).
        size = len(json.dumps(steady, separators=(",", ":")))
        self.assertLessEqual(size, 120 + 110 * 16, size)
        one = len(json.dumps(dict(steady, groups=steady["groups"][:1]), separators=(",", ":")))
        self.assertLessEqual(one, 120 + 110, one)
        for o in opened:
            c.collective_end(o)

    def test_per_collective_modes_remain(self):
        c = self.client(SHEPHERD_COLLECTIVE_REPORTS="completed")
        with c.collective("allreduce", "dp"):
            pass
        c.heartbeat()
        self.assertTrue(c.flush())
        self.assertEqual([(r["seq"], r["state"]) for r in self.d.reports("collective")], [(0, "completed")])
        self.assertEqual(self.summaries(), [])


class PageSummaryTest(unittest.TestCase):
    def test_the_page_carries_each_group_and_when_the_rank_last_delivered(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "p")
            w = ProgressPage.create(path)
            r = ProgressPage.open(path)
            self.assertFalse(r.read()["summary"])
            w.write(3, "train", (4, "allreduce", "dp", 50.0), groups=[("dp", 3, (4, "allreduce", 50.0)),
                                                                      ("tp", 9, None)], delivered=77.5)
            s = r.read()
            self.assertTrue(s["summary"])
            self.assertEqual(s["delivered"], 77.5)
            self.assertEqual(s["groups"], [{"group": "dp", "completed": 3,
                                            "open": {"seq": 4, "op": "allreduce", "since": 50.0}},
                                           {"group": "tp", "completed": 9, "open": None}])
            w.write(3, "train", None, groups=[("dp", 4, None)])  # `delivered` kept when not given
            self.assertEqual((r.read()["delivered"], len(r.read()["groups"])), (77.5, 1))
            # The helper's summary from it, and when it sends one.
            hs = helper_mod.build_summary(r.read(), rank=5, attempt=2)
            self.assertEqual((hs["kind"], hs["step"], hs["groups"]),
                             ("summary", 3, [{"group": "dp", "completed": 4, "count": 0, "wait_s": 0.0}]))
            state = r.read()
            self.assertIsNone(helper_mod.due(state, 77.5 + 1.4, 1.0))
            self.assertEqual(helper_mod.due(state, 77.5 + 1.6, 1.0), "summary")
            self.assertEqual(helper_mod.due(dict(state, summary=False), 77.5, 1.0), "heartbeat")
            w.close(unlink=True)
            r.close()


# A rank with the helper whose own thread runs freely (time.sleep releases the GIL), inside a collective.
FREE_RANK = textwrap.dedent("""
    import sys, time
    from shepherd_client import ShepherdClient
    c = ShepherdClient.from_env()
    assert c.start_helper()
    c.set_step(3)
    c.collective_begin("allreduce", "dp", 64)
    print("helper", c.helper_pid, flush=True)
    time.sleep(float(sys.argv[1]))
""")

# The same, then blocked in a C call holding the GIL: its own thread cannot run, the helper speaks for it.
GIL_RANK = FREE_RANK.replace("time.sleep(float(sys.argv[1]))",
                             "import ctypes; ctypes.PyDLL(None).sleep(int(float(sys.argv[1])))")


class HelperSummaryTest(unittest.TestCase):
    INTERVAL = 0.2

    def start(self, script):
        fake = FakeDaemon()
        self.addCleanup(fake.close)
        pages = tempfile.TemporaryDirectory()
        self.addCleanup(pages.cleanup)
        env = dict(os.environ, PYTHONPATH=PKG, SHEPHERD_URL=fake.url, SHEPHERD_JOB="job-s", RANK="1",
                   WORLD_SIZE="2", NODE_NAME="n1", SHEPHERD_HEARTBEAT_INTERVAL=str(self.INTERVAL),
                   SHEPHERD_PROGRESS_DIR=pages.name)
        env.pop("SHEPHERD_COLLECTIVE_REPORTS", None)
        rank = subprocess.Popen([sys.executable, "-c", script, "600"], env=env, stdout=subprocess.PIPE)
        self.addCleanup(rank.stdout.close)
        self.addCleanup(rank.wait)
        self.addCleanup(rank.kill)
        self.assertEqual(rank.stdout.readline().decode().split()[0], "helper")
        return fake

    def test_one_request_per_interval_while_the_rank_s_thread_delivers(self):
        fake = self.start(FREE_RANK)
        fake.wait_for(lambda: len(fake.reports("summary")) >= 3, 20, "summaries from the rank")
        with fake.lock:
            n0 = len(fake.posts)
        t0 = time.monotonic()
        fake.wait_for(lambda: len(fake.reports("summary")) >= 15, 30, "more summaries")
        with fake.lock:
            posts = len(fake.posts) - n0
        elapsed = time.monotonic() - t0
        # The helper sent nothing: every summary is the rank's own (the helper's carry no `node`).
        self.assertEqual([s for s in fake.reports("summary") if s.get("node") != "n1"], [])
        self.assertEqual(fake.reports("heartbeat") and
                         {h["summary"]["kind"] for h in fake.reports("heartbeat")}, {"summary"})
        # At most one request per interval (plus one for timing slack on a loaded machine).
        self.assertLessEqual(posts, elapsed / self.INTERVAL + 1, (posts, elapsed))

    def test_a_rank_holding_the_gil_is_summarized_by_its_helper(self):
        fake = self.start(GIL_RANK)
        helper = lambda: [s for s in fake.reports("summary") if "node" not in s]  # noqa: E731
        got = fake.wait_for(lambda: helper()[3:], 20, "summaries from the helper")
        for s in got:
            self.assertEqual((s["rank"], s["step"]), (1, 3))
            dp = {g["group"]: g for g in s["groups"]}["dp"]
            self.assertEqual((dp["completed"], dp["open"]["seq"], dp["open"]["op"], dp["count"]),
                             (-1, 0, "allreduce", 0))


if __name__ == "__main__":
    unittest.main()
