"""The fleet simulator at a tiny size against the real daemon: 18 simulated agents (16 nodes + 2 spares, two
leaves), two launched jobs, a short healthy period, then one node lost (its agent stops). The daemon must
name that node within its heartbeat timeout (3 s here) plus slack, hand its ranks to the spare of the same
leaf, and act on nothing while the fleet is healthy. The simulator runs as two shards (two processes, each
playing every other node), as a fleet past one process's open-files limit runs. About a minute."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = os.path.join(HERE, "..", "..", "bench", "fleet", "run_fleet.py")


class FleetSimSmoke(unittest.TestCase):
    def test_a_lost_node_is_found_and_replaced_from_its_leaf_and_the_healthy_fleet_sees_no_action(self):
        daemon, sim = os.environ.get("SHEPHERDD"), os.environ.get("FLEET_SIM")
        if not daemon or not sim:
            self.skipTest("SHEPHERDD and FLEET_SIM name the binaries (ctest sets them)")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "fleet.json")
            p = subprocess.run([sys.executable, RUN, "--size", "smoke", "--daemon", daemon, "--sim", sim,
                                "--faults", "node_loss", "--fault-s", "5", "--healthy-s", "10", "--shards", "2",
                                "--rank-reports", os.environ.get("FLEET_RANK_REPORTS", "heartbeat"), "--out", out],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=240)
            self.assertEqual(p.returncode, 0, p.stderr[-3000:])
            r = json.load(open(out))
        self.assertEqual(r["nodes"], 18)
        self.assertEqual(r["ranks"], 96)  # 64 + 32, every rank was handed out and ran
        self.assertGreater(r["traffic"]["heartbeats_ok"], 18 * 10)
        self.assertEqual(r["healthy"]["false_findings"], 0, r["false_findings_list"])
        self.assertEqual(r["healthy"]["restarts"], 0)
        self.assertEqual(len(r["injections"]), 1)
        inj = r["injections"][0]
        self.assertEqual(inj["kind"], "node_loss")
        self.assertEqual(inj.get("finding"), "node_lost", inj)
        self.assertEqual(inj["finding_nodes"], [inj["node"]])
        # Node timeout 3 s (run_fleet's smoke config), 1 s ticks, a loaded machine: well under 10 s.
        self.assertLess(inj["detect_s"], 10, inj)
        # The lost node's ranks went to the spare of its leaf (one per leaf of 9 nodes: node-00009/-00018).
        self.assertEqual(inj.get("replacement_scope"), "leaf", inj)
        self.assertIn(inj["replacement"], ("node-00009", "node-00018"))


if __name__ == "__main__":
    unittest.main()
