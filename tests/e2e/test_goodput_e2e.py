"""Goodput accounting, end to end on real PyTorch (the acceptance test of GET /v1/jobs/{id}/goodput): a
4-rank DDP job (gloo, CPU) under real agents (test_recovery_e2e's cluster and job), once without faults,
once with a node killed, once with a rank stopped (a hang). The test keeps its own clock: when it submitted,
killed or stopped, and what the ranks printed (tests/e2e/train_ddp.py's TIMING lines: each process's first
step, each checkpoint's save time and end), and checks the daemon's answer against it:

- the nine buckets sum to the answer's wall time within 1 s, and that wall time is the test's own;
- no faults: the ETTR is within 2 % of the productive share the test computes (step time since the first
  step, less saves, over the time since submission);
- a fault: queued + startup, productive (+ checkpoint saves), lost progress (the resume checkpoint's end →
  the fault) and the fault's cost (the fault → the first step after the resume: detection, recovery,
  backoff) each match the test's measure within 2 s.

Every wait has a deadline; the machine may be loaded (2 cores shared).
"""
import glob
import os
import re
import signal
import sys
import time
import unittest
from datetime import datetime

sys.path.insert(0, os.path.dirname(__file__))
from cluster import Cluster  # noqa: E402
from test_recovery_e2e import job_spec  # noqa: E402

BUCKETS = ("queued", "startup", "productive", "lost_progress", "checkpoint_save", "detection", "recovery",
           "backoff", "unattributed")
SUM_TOLERANCE_S = 1.0
MEASURE_TOLERANCE_S = 2.0
# Training after the first step (or the resume) before the answer is read. Without faults, longer: the ETTR
# is checked relatively, and the half second a step report may wait for its ride is 1 % of a minute.
TRAIN_FOR_S = 25
TRAIN_NO_FAULTS_FOR_S = 45

FIRST_STEP = re.compile(r"TIMING first_step (\d+) at ([0-9.]+)")
CHECKPOINT = re.compile(r"TIMING checkpoint (\d+) save_s ([0-9.]+) at ([0-9.]+)")
LOAD = re.compile(r"TIMING load_s ([0-9.]+) at ([0-9.]+)")
MARK_TOLERANCE_S = 1.0  # a step report rides with the next heartbeat (0.5 s) before the daemon sees it


def rfc3339(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


class GoodputE2E(unittest.TestCase):
    def setUp(self):
        self.c = Cluster()
        self.c.start_agent("n0", gpus=2, topology="spine=s0,leaf=l0")
        self.c.start_agent("n1", gpus=2, topology="spine=s0,leaf=l0")
        self.c.start_agent("sp0", gpus=2, topology="spine=s0,leaf=l0", spare=True)
        self.c.start_agent("sp1", gpus=2, topology="spine=s0,leaf=l1", spare=True)

    def tearDown(self):
        self.assertEqual(self.c.close(), 0, "shepherdd did not exit cleanly on SIGTERM")

    # ---- the test's own measurements
    def submit(self):
        spec = job_spec(self.c.path("ckpt"))
        submitted = time.time()
        job = self.c.api("POST", "/v1/jobs", spec, expect=201)["id"]
        self.c.wait_for(lambda: self.c.api("GET", "/v1/jobs/" + job)["state"] == "running", 60,
                        "the agents to start the job's ranks")
        return job, submitted

    def logs(self, job, attempt):
        """Every rank's log of `attempt` that the agents kept, by rank (whatever node ran it)."""
        out = {}
        for path in glob.glob(self.c.path("agent-*", "logs", "%s-a%d-r*.log" % (job, attempt))):
            rank = int(path.rsplit("-r", 1)[1].split(".")[0])
            with open(path) as f:
                out[rank] = f.read()
        return out

    def first_step_at(self, job, attempt):
        """When the attempt's first step was reported (the earliest rank), once every rank has said it."""
        def seen():
            logs = self.logs(job, attempt)
            times = [float(m.group(2)) for text in logs.values() for m in [FIRST_STEP.search(text)] if m]
            return min(times) if len(logs) == 4 and len(times) == 4 else None
        return self.c.wait_for(seen, 180, "attempt %d's first step in the rank logs" % attempt, interval=0.2)

    def saves(self, job, attempt, after, before):
        """Checkpoints saved in the attempt that ended within (after, before]: {step: (save_s, end)}, the
        longest rank's phase for each (the ranks wait for each other at the save's barrier)."""
        out = {}
        for text in self.logs(job, attempt).values():
            for m in CHECKPOINT.finditer(text):
                step, save_s, end = int(m.group(1)), float(m.group(2)), float(m.group(3))
                if after < end <= before and save_s > out.get(step, (0, 0))[0]:
                    out[step] = (save_s, end)
        return out

    def train_for(self, since, seconds):
        """Lets the job train `seconds` past `since` (bounded; the condition is the clock, nothing else)."""
        self.c.wait_for(lambda: time.time() >= since + seconds, seconds + 5, "%d s of training" % seconds,
                        interval=0.5)

    def goodput(self, job):
        before = time.time()
        g = self.c.api("GET", "/v1/jobs/%s/goodput" % job, expect=200)
        return g, (before + time.time()) / 2

    def marks(self, job):
        return self.c.api("GET", "/v1/jobs/" + job)["current_attempt"]

    def check_marks(self, job, attempt, first, saved):
        """The daemon's marks of the running attempt against the ranks' own timing."""
        a = self.marks(job)
        self.assertEqual(a["number"], attempt)
        first_step_at = rfc3339(a["first_step_at"])
        print("GOODPUT-E2E marks attempt %d first_step_at daemon=%.2f test=%.2f save_s daemon=%.2f test=%.2f"
              % (attempt, first_step_at, first, a.get("save_s", 0), saved), flush=True)
        self.assertGreaterEqual(first_step_at, first - 0.1)  # received after it was sent
        self.assertAlmostEqual(first_step_at, first, delta=MARK_TOLERANCE_S)
        self.assertAlmostEqual(a.get("save_s", 0), saved, delta=MARK_TOLERANCE_S)
        return a

    # ---- checks
    def seconds(self, g, *names):
        return sum(g["buckets"][n]["seconds"] for n in names)

    def check_whole(self, g, submitted, read_at):
        self.assertEqual(set(g["buckets"]), set(BUCKETS), g)
        for name in BUCKETS:
            self.assertGreaterEqual(g["buckets"][name]["seconds"], 0, (name, g))
        self.assertAlmostEqual(self.seconds(g, *BUCKETS), g["wall_s"], delta=SUM_TOLERANCE_S, msg=g)
        self.assertAlmostEqual(g["wall_s"], read_at - submitted, delta=MEASURE_TOLERANCE_S, msg=g)

    def close_to(self, got, want, what, g):
        print("GOODPUT-E2E %s daemon=%.2f test=%.2f" % (what, got, want), flush=True)
        self.assertAlmostEqual(got, want, delta=MEASURE_TOLERANCE_S, msg="%s: %s" % (what, g))

    # ---- the runs
    def test_a_job_without_faults_reports_the_productive_share_as_its_ettr(self):
        job, submitted = self.submit()
        first = self.first_step_at(job, 1)
        self.train_for(first, TRAIN_NO_FAULTS_FOR_S)
        marked_at = time.time()
        self.check_marks(job, 1, first, sum(s for s, _ in self.saves(job, 1, first, marked_at).values()))
        g, read_at = self.goodput(job)
        self.check_whole(g, submitted, read_at)
        saved = sum(s for s, _ in self.saves(job, 1, first, read_at).values())
        self.assertGreater(len(self.saves(job, 1, first, read_at)), 3, "checkpoints were saved meanwhile")
        productive = (read_at - first) - saved
        share = productive / (read_at - submitted)
        print("GOODPUT-E2E no_faults ettr daemon=%.4f test=%.4f (saves %.2f s)" % (g["ettr"], share, saved),
              flush=True)
        # The daemon's productive time starts at its first-step mark and leaves out its save time: each may
        # differ from the ranks' own timing by MARK_TOLERANCE_S (a relayed report waits for the agent's
        # next heartbeat), so the share may differ by both over the wall time, and no more.
        self.assertAlmostEqual(g["ettr"], share, delta=2 * MARK_TOLERANCE_S / (read_at - submitted), msg=g)
        self.close_to(self.seconds(g, "queued", "startup"), first - submitted, "queued+startup", g)
        self.close_to(self.seconds(g, "productive"), productive, "productive", g)
        self.close_to(self.seconds(g, "checkpoint_save"), saved, "checkpoint_save", g)
        self.assertEqual(self.seconds(g, "lost_progress", "detection", "recovery", "backoff"), 0, g)

    def run_fault(self, name, inject):
        """Submits, trains past a good checkpoint, injects the fault (`inject()` returns when it struck, on
        the test's clock), waits for the resume and checks each bucket against the test's measures."""
        job, submitted = self.submit()
        first = self.first_step_at(job, 1)
        self.c.wait_for(lambda: [cp for cp in self.c.api("GET", "/v1/jobs/%s/checkpoints" % job)["checkpoints"]
                                 if cp["status"] == "good" and cp["step"] >= 10], 180, "a good checkpoint")
        struck = inject(job)

        def resumed():
            j = self.c.api("GET", "/v1/jobs/" + job)
            a = j.get("current_attempt") or {}
            return a if j["state"] == "running" and a.get("number", 1) >= 2 else None
        attempt = self.c.wait_for(resumed, 180, "a new attempt running", interval=0.2)
        resumed_at = self.first_step_at(job, attempt["number"])
        self.train_for(resumed_at, TRAIN_FOR_S)
        marked_at = time.time()
        a = self.check_marks(job, attempt["number"], resumed_at,
                             sum(s for s, _ in self.saves(job, attempt["number"], resumed_at, marked_at).values()))
        loaded = max(float(m.group(1)) for text in self.logs(job, attempt["number"]).values()
                     for m in LOAD.finditer(text))
        self.assertAlmostEqual(a.get("load_s", 0), loaded, delta=MARK_TOLERANCE_S)
        g, read_at = self.goodput(job)
        self.check_whole(g, submitted, read_at)

        # The resume checkpoint's end in attempt 1 (its step was the last one a good checkpoint kept).
        resume_step = attempt["resume_step"]
        kept = self.saves(job, 1, first, struck)
        self.assertIn(resume_step, kept, "attempt %d resumed from a checkpoint attempt 1 saved" % attempt["number"])
        kept_until = kept[resume_step][1]
        saved = sum(s for step, (s, _) in kept.items() if step <= resume_step)
        saved += sum(s for s, _ in self.saves(job, attempt["number"], resumed_at, read_at).values())
        productive = (kept_until - first) + (read_at - resumed_at) - saved
        self.close_to(self.seconds(g, "queued", "startup"), first - submitted, name + " queued+startup", g)
        self.close_to(self.seconds(g, "productive", "checkpoint_save"), productive + saved,
                      name + " productive+saves", g)
        self.close_to(self.seconds(g, "lost_progress"), struck - kept_until, name + " lost_progress", g)
        self.close_to(self.seconds(g, "detection", "recovery", "backoff"), resumed_at - struck,
                      name + " fault->resumed", g)
        self.assertLess(self.seconds(g, "unattributed"), MEASURE_TOLERANCE_S, g)
        self.assertLess(g["ettr"], 1.0)
        return g

    def test_a_node_killed_costs_its_lost_progress_and_its_recovery(self):
        def kill(job):
            struck = time.time()
            self.assertEqual(len(self.c.kill_node("n1")), 2)
            return struck
        self.run_fault("node_kill", kill)

    def test_a_stopped_rank_costs_its_lost_progress_and_its_hang_recovery(self):
        def stop(job):
            ranks = self.c.rank_processes("n1")
            struck = time.time()
            os.killpg(ranks[max(ranks)], signal.SIGSTOP)
            return struck
        self.run_fault("hang", stop)


if __name__ == "__main__":
    unittest.main(verbosity=2)
