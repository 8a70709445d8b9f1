"""Many agents behind one address, and a flooding node, against the real shepherdd over real HTTP.

- ManyAgentsE2E: 1,050 simulated node agents on 127.0.0.1 (bench/many_agents.py: each registers, holds a
  long poll and a keep-alive heartbeat connection, heartbeats every second, lists its ranks as running),
  one job placed on all of them (8 ranks each), at the daemon's default connection caps: no connection is
  refused or shed, every agent registers and holds its ranks, no node is lost and the job is not restarted.
- FloodE2E: one node's "agent" sends heartbeats as fast as eight connections allow; it is answered 429 with
  Retry-After and counted (shepherd_requests_shed_total{reason="rate_limited"}), while another node's
  once-a-second heartbeats are all answered 200 in time, and neither node is lost (the flooder still gets its
  rate through).

Run: SHEPHERDD=build/daemon/shepherdd python3 -m unittest -v test_many_agents_e2e (from tests/e2e).
"""
import asyncio
import json
import os
import re
import shutil
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import many_agents  # noqa: E402

SHEPHERDD = os.environ.get("SHEPHERDD", os.path.join(HERE, "..", "..", "build", "daemon", "shepherdd"))


class ManyAgentsE2E(unittest.TestCase):
    def test_a_thousand_agents_behind_one_address_are_neither_refused_nor_lost(self):
        agents = 1050
        r = many_agents.fleet(SHEPHERDD, agents=agents, seconds=15, keep=False)
        print(json.dumps(r), file=sys.stderr)
        self.assertEqual(r["registered"], agents)
        self.assertEqual(r["placed"], agents)
        # Every answer the agents saw was a success: nothing refused (503/429) or cut off (0).
        self.assertEqual(set(r["answers"]), {"200", "201"}, r["answers"])
        self.assertEqual(r["connect_errors"], 0)
        self.assertEqual(r["connects"], 2 * agents)  # one long poll and one heartbeat connection each, kept
        self.assertTrue(all(v == 0 for v in r["shed"].values()), r["shed"])
        self.assertEqual(r["node_lost_log_lines"], 0)
        self.assertEqual(r["job_attempt"], 1)
        self.assertEqual(r["job_state"], "running")
        # Each agent heartbeat about once a second for 15 s: most of them were answered.
        self.assertGreater(r["heartbeats_ok"], agents * 15 * 0.5)


async def _flood_and_watch(port, seconds):
    """Node f floods on 8 connections; node w heartbeats every second. Returns (flood statuses, [(status,
    seconds)] of w's heartbeats)."""
    totals = many_agents.Totals()
    for node in ("f", "w"):
        c = many_agents.Conn(port, None, totals)
        status, _, raw = await c.call("POST", "/v1/nodes", {"id": node, "hostname": "h-" + node, "gpus": 8,
                                                             "topology": {"spine": "s0", "leaf": "l0"}})
        await c.close()
        assert status in (200, 201), (status, raw)
    body = {"agent": {"pid": 4242, "started_at": "2026-11-29T00:00:00.000Z"}, "processes": []}
    until = time.monotonic() + seconds
    flood = {}

    async def flooder():
        c = many_agents.Conn(port, None, totals)
        while time.monotonic() < until:
            status, _, _ = await c.call("POST", "/v1/nodes/f/heartbeat", body, timeout=10)
            flood[status] = flood.get(status, 0) + 1
        await c.close()

    watched = []

    async def watcher():
        c = many_agents.Conn(port, None, totals)
        while time.monotonic() < until:
            start = time.monotonic()
            status, _, _ = await c.call("POST", "/v1/nodes/w/heartbeat", body, timeout=10)
            watched.append((status, time.monotonic() - start))
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - start)))
        await c.close()

    await asyncio.gather(watcher(), *(flooder() for _ in range(8)))
    return flood, watched


class FloodE2E(unittest.TestCase):
    def test_a_flooding_node_is_rate_limited_and_another_nodes_heartbeats_are_answered_in_time(self):
        daemon = many_agents.DaemonProcess(SHEPHERDD, {"node_heartbeat_timeout_s": 3})
        try:
            flood, watched = asyncio.run(_flood_and_watch(daemon.port, 12))
            status, raw = asyncio.run(many_agents.admin(daemon.port, "GET", "/metrics"))
            self.assertEqual(status, 200)
            text = raw.decode()
            with open(daemon.log_path, errors="replace") as f:
                log = f.read()
        finally:
            daemon.stop()
            shutil.rmtree(daemon.tmp, ignore_errors=True)
        print("flood answers %s; watched node: %d heartbeats, worst %.3f s" %
              (flood, len(watched), max(t for _, t in watched)), file=sys.stderr)
        # The flood was turned away, far more often than it was let through...
        self.assertGreater(flood.get(429, 0), 5 * flood.get(200, 0), flood)
        limited = many_agents.metric_values(text, "shepherd_requests_shed_total")
        self.assertGreaterEqual(limited.get('{reason="rate_limited"}', 0), flood.get(429, 0), limited)
        # ... but its rate got through (20 a second, a burst of 80), so it was never read as silent.
        self.assertGreaterEqual(flood.get(200, 0), 20)
        # The other node's heartbeats were all answered, each well within its node timeout (3 s).
        self.assertGreaterEqual(len(watched), 8)
        self.assertEqual({s for s, _ in watched}, {200}, watched)
        self.assertLess(max(t for _, t in watched), 1.5, watched)
        self.assertEqual(re.findall(r"node (?:f|w) .*node lost|of node (?:f|w) silent", log), [])


if __name__ == "__main__":
    unittest.main()
