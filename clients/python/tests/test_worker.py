"""Tests of the synthetic rank worker: fault parsing, and short runs against the fake daemon."""

import os
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
sys.path.insert(0, PKG)
sys.path.insert(0, HERE)

import shepherd_worker as w  # noqa: E402
from fake_server import FakeDaemon  # noqa: E402

WORKER = os.path.join(PKG, "shepherd_worker.py")


class ParseTest(unittest.TestCase):
    def test_fault_specs(self):
        F = w.Fault
        self.assertEqual(w.parse_faults("hang@12"), [F("hang", 12)])
        self.assertEqual(w.parse_faults("hang-cpu@3, stall@4"), [F("hang_cpu", 3), F("hang_cpu", 4)])
        self.assertEqual(w.parse_faults("die@12"), [F("die", 12, 1)])
        self.assertEqual(w.parse_faults("die@12:7"), [F("die", 12, 7)])
        self.assertEqual(w.parse_faults("slow@12:3.5"), [F("slow", 12, 3.5)])
        self.assertEqual(w.parse_faults("slow@2"), [F("slow", 2, 3.0)])
        self.assertEqual(w.parse_faults("corrupt@5,nan@9"), [F("corrupt", 5), F("nan", 9)])
        self.assertEqual(w.parse_faults(""), [])
        self.assertEqual(w.parse_faults(None), [])
        for bad in ("hang", "hang@", "boom@3", "hang@x", "corrupt@3:1", "slow@3:0", "die@-1"):
            with self.assertRaises(ValueError, msg=bad):
                w.parse_faults(bad)

    def test_which_ranks_and_attempts(self):
        self.assertIsNone(w.parse_ranks(None))
        self.assertEqual(w.parse_ranks("1, 5"), {1, 5})
        self.assertTrue(w.fault_applies(None, "1", 3, 1))
        self.assertFalse(w.fault_applies({5}, "1", 3, 1))
        self.assertTrue(w.fault_applies({5}, "1", 5, 1))
        self.assertFalse(w.fault_applies({5}, "1", 5, 2))
        self.assertTrue(w.fault_applies({5}, "all", 5, 2))
        self.assertTrue(w.fault_applies({5}, "1,2", 5, 2))

    def test_step_from_checkpoint_path(self):
        self.assertEqual(w.parse_step_from_path("/ckpt/job-000001/step-40"), 40)
        self.assertEqual(w.parse_step_from_path("/ckpt/step-10/x/step-40.pt"), 40)
        self.assertIsNone(w.parse_step_from_path("/ckpt/latest"))

    def test_replicas_hash_alike_unless_corrupted(self):
        self.assertEqual(w.synthetic_hash(0, 1, 10), w.synthetic_hash(0, 1, 10))
        self.assertNotEqual(w.synthetic_hash(0, 1, 10), w.synthetic_hash(1, 1, 10))
        self.assertNotEqual(w.synthetic_hash(0, 1, 10), w.synthetic_hash(0, 1, 10, corrupt_rank=3))


class RunTest(unittest.TestCase):
    def setUp(self):
        self.d = FakeDaemon()
        self.addCleanup(self.d.close)
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.procs = []
        self.addCleanup(self._reap)

    def _reap(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)
            for f in (p.stdout, p.stderr):
                if f:
                    f.close()

    def env(self, rank=0, world=2, attempt=1, **extra):
        env = dict(os.environ)
        for k in list(env):
            if k.startswith("SHEPHERD_"):
                del env[k]
        env.update({"SHEPHERD_URL": self.d.url, "SHEPHERD_JOB": "job-7", "SHEPHERD_ATTEMPT": str(attempt),
                    "RANK": str(rank), "WORLD_SIZE": str(world), "SHEPHERD_RANK_COORDS": "0,0,%d" % rank,
                    "SHEPHERD_HEARTBEAT_INTERVAL": "0.05"})
        env.update(extra)
        return env

    def start(self, args, **env_kw):
        p = subprocess.Popen([sys.executable, WORKER, "--quiet"] + args, env=self.env(**env_kw),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p

    def run_worker(self, args, **env_kw):
        p = self.start(args, **env_kw)
        out, err = p.communicate(timeout=60)
        return p.returncode, out, err

    def test_clean_run_checkpoints_and_resume(self):
        ck = os.path.join(self.tmp.name, "ck")
        rc, out, err = self.run_worker(["--steps", "6", "--step-time", "0.01", "--ckpt-dir", ck,
                                        "--ckpt-every", "3", "--hash-every", "2"])
        self.assertEqual(rc, 0, err)
        self.assertEqual([r["step"] for r in self.d.reports("step")], [1, 2, 3, 4, 5, 6])
        self.assertEqual([r["step"] for r in self.d.reports("param_hash")], [2, 4, 6])
        cks = self.d.reports("checkpoint")
        self.assertEqual([(r["step"], r["path"]) for r in cks],
                         [(3, os.path.join(ck, "step-3")), (6, os.path.join(ck, "step-6"))])
        self.assertTrue(os.path.exists(os.path.join(ck, "step-3", "rank-0")))
        self.assertIn("checkpoint_save", {r.get("phase") for r in self.d.reports("heartbeat")})
        # The default mode: no collective reports; the summaries say dp's seqs 0..5 completed, six in all.
        self.assertEqual(self.d.reports("collective"), [])
        dp = [g for r in self.d.reports("summary") for g in r["groups"] if g["group"] == "dp"]
        self.assertEqual(max(g["completed"] for g in dp), 5)
        self.assertEqual(sum(g["count"] for g in dp), 6)
        # SHEPHERD_COLLECTIVE_REPORTS=all (for debugging) sends each collective's report instead.
        self.d.posts.clear()
        rc, out, err = self.run_worker(["--steps", "6", "--step-time", "0.01"], SHEPHERD_COLLECTIVE_REPORTS="all")
        self.assertEqual(rc, 0, err)
        self.assertEqual([r["seq"] for r in self.d.reports("collective") if r["state"] == "completed"],
                         list(range(6)))
        self.assertEqual(self.d.reports("summary"), [])

        n = len(self.d.reports("step"))
        rc, out, err = self.run_worker(["--steps", "6", "--step-time", "0.01"], attempt=2,
                                       SHEPHERD_RESUME_CHECKPOINT=os.path.join(ck, "step-3"))
        self.assertEqual(rc, 0, err)
        self.assertIn("resumed from step 3", out)
        self.assertEqual([(r["step"], r["attempt"]) for r in self.d.reports("step")[n:]],
                         [(4, 2), (5, 2), (6, 2)])
        self.assertIn("checkpoint_load", {r.get("phase") for r in self.d.reports("heartbeat")})

    def test_die_exits_non_zero_after_reporting_earlier_steps(self):
        rc, out, err = self.run_worker(["--steps", "10", "--step-time", "0.01", "--fault", "die@3"])
        self.assertNotEqual(rc, 0)
        self.assertEqual([r["step"] for r in self.d.reports("step")], [1, 2])

    def test_fault_for_another_rank_or_attempt_does_not_fire(self):
        rc, _, err = self.run_worker(["--steps", "3", "--step-time", "0.01"], rank=1,
                                     SHEPHERD_FAULT="die@2", SHEPHERD_FAULT_RANK="0")
        self.assertEqual(rc, 0, err)
        rc, _, err = self.run_worker(["--steps", "3", "--step-time", "0.01", "--fault", "die@2"], attempt=2)
        self.assertEqual(rc, 0, err)

    def test_hang_inside_collective_keeps_heartbeating_with_it_open(self):
        p = self.start(["--steps", "10", "--step-time", "0.01", "--fault", "hang@3"])

        def open_heartbeats():
            hb = [r for r in self.d.reports("heartbeat") if r.get("collective")]
            return hb if len(hb) >= 5 else None

        hb = self.d.wait_for(open_heartbeats, timeout=20, what="heartbeats inside the hung collective")
        self.assertIsNone(p.poll())
        last = hb[-5:]
        self.assertEqual({(r["collective"]["seq"], r["collective"]["group"]) for r in last}, {(2, "dp")})
        self.assertEqual(len({r["collective"]["since"] for r in last}), 1)
        self.assertEqual({r["step"] for r in last}, {3})
        self.assertEqual([r["step"] for r in self.d.reports("step")], [1, 2])
        p.terminate()  # default SIGTERM action: the hung worker goes away
        p.wait(timeout=10)

    def test_hang_outside_collectives_heartbeats_without_one(self):
        p = self.start(["--steps", "10", "--step-time", "0.01", "--fault", "hang-cpu@3"])
        self.d.wait_for(lambda: len([r for r in self.d.reports("heartbeat") if r.get("step") == 3]) >= 4,
                        timeout=20, what="heartbeats at step 3")
        self.assertIsNone(p.poll())
        self.assertNotIn("collective", self.d.reports("heartbeat")[-1])
        self.assertEqual([r["step"] for r in self.d.reports("step")], [1, 2])

    def test_corrupt_nan_and_slow(self):
        args = ["--steps", "4", "--step-time", "0.05", "--hash-every", "1"]
        procs = [self.start(args + ["--fault", "corrupt@3,nan@4,slow@3:4"], rank=r,
                            SHEPHERD_FAULT_RANK="1") for r in (0, 1)]
        for p in procs:
            p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0)
        hashes = {}
        for r in self.d.reports("param_hash"):
            hashes.setdefault(r["step"], {})[r["rank"]] = r["hash"]
        self.assertEqual([hashes[s][0] == hashes[s][1] for s in (1, 2, 3, 4)], [True, True, False, False])
        steps = {(r["rank"], r["step"]): r for r in self.d.reports("step")}
        self.assertEqual(steps[(1, 4)]["loss"], "nan")
        self.assertIsInstance(steps[(0, 4)]["loss"], float)
        self.assertGreater(steps[(1, 3)]["step_time_s"], 2 * steps[(0, 3)]["step_time_s"])

    def test_sync_dir_makes_peers_wait_inside_the_collective(self):
        sync = os.path.join(self.tmp.name, "sync")
        args = ["--steps", "6", "--step-time", "0.01", "--sync-dir", sync, "--dp-size", "2"]
        p0 = self.start(args, rank=0)
        p1 = self.start(args + ["--fault", "hang-cpu@3"], rank=1)

        def rank0_heartbeats():
            return [r for r in self.d.reports("heartbeat") if r["rank"] == 0]

        # Under load rank 0 may first wait in dp#0 for rank 1 to start: wait for three heartbeats in dp#2.
        self.d.wait_for(lambda: len([r for r in rank0_heartbeats() if (r.get("collective") or {}).get("seq") == 2])
                        >= 3, timeout=20, what="rank 0 waiting in dp#2")
        hb = rank0_heartbeats()
        first = next(i for i, r in enumerate(hb) if (r.get("collective") or {}).get("seq") == 2)
        # Once inside, it stays there: every later heartbeat is in dp#2, at step 3.
        self.assertEqual({((r.get("collective") or {}).get("seq"), r.get("step")) for r in hb[first:]}, {(2, 3)})
        self.assertIsNone(p0.poll())
        self.assertEqual(max(r["step"] for r in self.d.reports("step") if r["rank"] == 0), 2)
        p1.kill()

    def test_bad_fault_flag_exits_2(self):
        rc, _, err = self.run_worker(["--fault", "explode@1"])
        self.assertEqual(rc, 2)
        self.assertIn("bad fault", err)


if __name__ == "__main__":
    unittest.main()
