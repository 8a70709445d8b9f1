"""Zero-code instrumentation on real PyTorch (CPU, gloo): a stock DDP script (tests/e2e/stock_ddp.py) runs
under `python3 -m shepherd_client.run` as two ranks against a fake daemon, and every report the daemon
needs is checked. Skipped when torch is not installed."""

import collections
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

from fake_server import FakeDaemon

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
sys.path.insert(0, PKG)  # run alone too (discover puts it there through the other modules)
STOCK = os.path.join(HERE, "..", "..", "..", "tests", "e2e", "stock_ddp.py")

try:
    import torch  # noqa: F401

    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@unittest.skipUnless(HAVE_TORCH, "needs torch")
class StockScriptUnderRunTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fake = FakeDaemon()
        cls.dir = tempfile.mkdtemp(prefix="shepherd-instr-")
        port = free_port()
        procs = []
        for rank in range(2):
            env = dict(os.environ)
            env.update({"RANK": str(rank), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                        "GLOO_SOCKET_IFNAME": "lo", "SHEPHERD_URL": cls.fake.url, "SHEPHERD_JOB": "job-t",
                        "SHEPHERD_ATTEMPT": "1", "SHEPHERD_PARALLELISM": "1,1,2", "SHEPHERD_RANK_COORDS": "0,0,%d" % rank,
                        "SHEPHERD_SDC_EVERY": "5", "SHEPHERD_CHECKPOINT_DIR": cls.dir, "SHEPHERD_HEARTBEAT_INTERVAL": "0.2",
                        "SHEPHERD_COLLECTIVE_REPORTS": "all",  # what each op reports (SummaryUnderRunTest: default)
                        "SHEPHERD_PG_TIMEOUT_S": "123", "PYTHONPATH": PKG})
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "shepherd_client.run", STOCK, "--steps", "10", "--ckpt-every", "5",
                 "--ckpt-dir", cls.dir], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
        cls.outputs = [p.communicate(timeout=240)[0].decode() for p in procs]
        cls.codes = [p.returncode for p in procs]

    @classmethod
    def tearDownClass(cls):
        cls.fake.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def by_rank(self, kind):
        out = collections.defaultdict(list)
        for r in self.fake.reports(kind):
            out[r["rank"]].append(r)
        return out

    def test_script_runs_unchanged(self):
        self.assertEqual(self.codes, [0, 0], "\n".join(self.outputs))
        self.assertIn("rank 0: done at step 10", self.outputs[0])

    def test_steps_loss_and_grad_norm(self):
        steps = self.by_rank("step")
        for rank in (0, 1):
            self.assertEqual([r["step"] for r in steps[rank]], list(range(1, 11)))
            for r in steps[rank]:
                self.assertIsInstance(r["loss"], float)
                self.assertIsInstance(r["grad_norm"], float)
                self.assertGreaterEqual(r["step_time_s"], 0)

    def test_ddp_buckets_and_barriers_are_collectives_of_the_dp_group(self):
        done = [r for r in self.fake.reports("collective") if r["state"] == "completed"]
        for rank in (0, 1):
            ops = collections.Counter(r["op"] for r in done if r["rank"] == rank)
            self.assertGreaterEqual(ops["allreduce"], 10)  # at least one gradient bucket per step
            self.assertGreaterEqual(ops["barrier"], 3)  # two checkpoint barriers and the last one
            self.assertEqual({r["group"] for r in done if r["rank"] == rank}, {"dp"})
            buckets = [r for r in done if r["rank"] == rank and r["op"] == "allreduce"]
            self.assertEqual(buckets[0]["bytes"], 4 * (16 * 32 + 32 + 32 + 1))  # one bucket holds all grads
        # seqs of the dp group are counted identically on both ranks
        seqs = [sorted(r["seq"] for r in done if r["rank"] == rank) for rank in (0, 1)]
        self.assertEqual(seqs[0], seqs[1])

    def test_param_hashes_agree_across_replicas(self):
        hashes = self.by_rank("param_hash")
        self.assertEqual([r["step"] for r in hashes[0]], [5, 10])
        self.assertEqual([r["hash"] for r in hashes[0]], [r["hash"] for r in hashes[1]])

    def test_rank0_save_is_one_replicated_checkpoint_at_the_final_path(self):
        ckpts = self.fake.reports("checkpoint")
        self.assertEqual([(r["rank"], r["step"], r["path"], r["scope"]) for r in ckpts],
                         [(0, 5, os.path.join(self.dir, "step-5.pt"), "replicated"),
                          (0, 10, os.path.join(self.dir, "step-10.pt"), "replicated")])

    def test_each_rank_reports_finished_once_after_its_last_step(self):
        finished = self.by_rank("finished")
        for rank in (0, 1):
            self.assertEqual(len(finished[rank]), 1, finished)
            last_step = max(r["time"] for r in self.fake.reports("step") if r["rank"] == rank)
            self.assertGreaterEqual(finished[rank][0]["time"], last_step)

    def test_heartbeats_and_checkpoint_phase(self):
        hbs = self.fake.reports("heartbeat")
        self.assertTrue(hbs)
        self.assertIn("checkpoint_save", {h.get("phase") for h in hbs if h["rank"] == 0})



def run_ranks(test, body, world_size=1, env=None, sitecustomize=None, zero_code=True, args=None):
    """Runs `body` as a script of `world_size` ranks under `python3 -m shepherd_client.run` (zero_code=False:
    `python3 script.py`, for a script that calls install() itself) against a fake daemon (both cleaned up
    with `test`), with `env` added to each rank's environment and `sitecustomize` (source) run at interpreter
    start-up when given. Returns the finished processes (CompletedProcess, by rank) and the fake daemon."""
    fake = FakeDaemon()
    test.addCleanup(fake.close)
    d = tempfile.mkdtemp(prefix="shepherd-run-")
    test.addCleanup(shutil.rmtree, d, True)
    script = os.path.join(d, "script.py")
    with open(script, "w") as f:
        f.write(body)
    if sitecustomize is not None:
        with open(os.path.join(d, "sitecustomize.py"), "w") as f:
            f.write(sitecustomize)
    port = free_port()
    procs = []
    for rank in range(world_size):
        rank_env = dict(os.environ)
        rank_env.update({"RANK": str(rank), "WORLD_SIZE": str(world_size), "MASTER_ADDR": "127.0.0.1",
                         "MASTER_PORT": str(port), "GLOO_SOCKET_IFNAME": "lo", "SHEPHERD_URL": fake.url,
                         "SHEPHERD_JOB": "job-1", "SHEPHERD_ATTEMPT": "1", "SHEPHERD_HEARTBEAT_INTERVAL": "0.2",
                         "PYTHONPATH": PKG + (os.pathsep + d if sitecustomize is not None else "")})
        rank_env.update(env or {})
        launcher = ["-m", "shepherd_client.run"] if zero_code else []
        procs.append(subprocess.Popen([sys.executable] + launcher + [script] + list(args or []), env=rank_env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    outs = []
    for p in procs:
        try:
            stdout = p.communicate(timeout=240)[0]
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        outs.append(subprocess.CompletedProcess(p.args, p.returncode, stdout))
    return outs, fake


def run_one_rank(test, body, sitecustomize=None, env=None):
    """run_ranks for a one-rank job: its finished process and the fake daemon."""
    outs, fake = run_ranks(test, body, env=env, sitecustomize=sitecustomize)
    return outs[0], fake


@unittest.skipUnless(HAVE_TORCH, "needs torch")
class FinishedOnlyOnANormalEndTest(unittest.TestCase):
    """`finished` tells the daemon a silent rank is done, not lost: only a script that returned or exited 0
    may send it."""

    def run_script(self, body):
        out, fake = run_one_rank(self, body)
        return out.returncode, fake.reports("finished")

    def test_a_script_that_returns_or_exits_zero_finishes(self):
        for body in ("x = 1\n", "import sys\nsys.exit(0)\n", "import sys\nsys.exit()\n"):
            code, finished = self.run_script(body)
            self.assertEqual(code, 0, body)
            self.assertEqual([(r["rank"], r["attempt"]) for r in finished], [(0, 1)], body)

    def test_an_exception_or_a_non_zero_exit_does_not(self):
        for body, want in (("raise RuntimeError('boom')\n", 1), ("import sys\nsys.exit(3)\n", 3),
                           ("import sys\nsys.exit('bad config')\n", 1)):
            code, finished = self.run_script(body)
            self.assertEqual(code, want, body)
            self.assertEqual(finished, [], body)


SCHEDULER_SCRIPT = '''
import torch
model = torch.nn.Linear(4, 1)
for make in (lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda e: 0.9 ** e),
             lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=2),
             lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=3)):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = make(opt)
    for _ in range(3):
        opt.zero_grad()
        model(torch.ones(2, 4)).sum().backward()
        opt.step()
        sched.step()
print("schedulers ok")
'''


@unittest.skipUnless(HAVE_TORCH, "needs torch")
class LrSchedulersUnderRunTest(unittest.TestCase):
    """PyTorch's LR schedulers wrap optimizer.step through its __self__ and __func__: the instrumented step
    must stay a bound method (a plain function crashed every script that used one)."""

    def test_lambda_step_and_cosine_schedulers_work_and_steps_are_reported(self):
        out, fake = run_one_rank(self, SCHEDULER_SCRIPT)
        self.assertEqual(out.returncode, 0, out.stdout.decode())
        self.assertIn("schedulers ok", out.stdout.decode())
        self.assertEqual([r["step"] for r in fake.reports("step")], list(range(1, 4)))
        # The first optimizer defines steps: LambdaLR's 0.9 ** epoch, read after each step, before the scheduler's.
        for got, want in zip([r["lr"] for r in fake.reports("step")], [0.1, 0.09, 0.081]):
            self.assertAlmostEqual(got, want)


class LearningRateTest(unittest.TestCase):
    def test_the_largest_finite_lr_over_the_groups(self):
        from shepherd_client.instrument import learning_rate

        class Opt:
            def __init__(self, groups):
                self.param_groups = groups

        self.assertEqual(learning_rate(Opt([{"lr": 0.1}, {"lr": 0.3}, {"lr": 0.2}])), 0.3)
        self.assertEqual(learning_rate(Opt([{"lr": float("nan")}, {"lr": "x"}, {"lr": -1.0}, {"lr": 0.01}])), 0.01)
        self.assertIsNone(learning_rate(Opt([{"params": []}])))
        self.assertIsNone(learning_rate(object()))
        if HAVE_TORCH:
            import torch
            self.assertAlmostEqual(learning_rate(Opt([{"lr": torch.tensor(0.5)}])), 0.5)


# GradScaler.scale as on a GPU (CPU torch disables the scaler and returns the loss as it is), installed before
# the instrumentation: the loss times a scale that doubles at each call, as a fast growth_interval would.
GPU_LIKE_SCALER = '''
import torch.cuda.amp
def scale(self, outputs):
    self.test_scale = getattr(self, "test_scale", 512.0) * 2
    return outputs * self.test_scale
torch.cuda.amp.GradScaler.scale = scale
'''

AMP_SCRIPT = '''
import torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=1e-6)  # the CPU scaler does not unscale the gradients
scaler = torch.cuda.amp.GradScaler()
x, y = torch.randn(8, 4), torch.randn(8, 1)
for _ in range(3):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    print("loss %.9g scaled %.9g" % (loss.item(), scaler.scale(loss).item()))
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
'''


@unittest.skipUnless(HAVE_TORCH, "needs torch")
class GradScalerUnderRunTest(unittest.TestCase):
    """AMP: `scaler.scale(loss).backward()` reports the loss, not the loss times a scale that grows 2x every
    growth_interval steps (which looked like a divergence)."""

    def test_the_reported_loss_is_the_one_before_scaling(self):
        out, fake = run_one_rank(self, AMP_SCRIPT, sitecustomize=GPU_LIKE_SCALER)
        text = out.stdout.decode()
        self.assertEqual(out.returncode, 0, text)
        printed = [line.split() for line in text.splitlines() if line.startswith("loss ")]
        self.assertEqual(len(printed), 3, text)
        # the script's own scaling is there to be undone: 1024, 4096, 16384 times the loss
        for (_, loss, _, scaled), factor in zip(printed, (1024, 4096, 16384)):
            self.assertAlmostEqual(float(scaled), float(loss) * factor, delta=float(scaled) * 1e-6)
        reported = [r["loss"] for r in fake.reports("step")]
        self.assertEqual(len(reported), 3, text)
        for got, (_, loss, _, _) in zip(reported, printed):
            self.assertAlmostEqual(got, float(loss), delta=float(loss) * 1e-6)


COLLECTIVES_SCRIPT = '''
import torch, torch.distributed as dist
dist.init_process_group("gloo")
dist.all_reduce(torch.ones(4))
out = [torch.zeros(3)]
dist.all_gather(out, torch.ones(3))
dist.broadcast(torch.ones(2, 2), 0)
dist.destroy_process_group()
print("collectives ok")
'''


@unittest.skipUnless(HAVE_TORCH, "needs torch")
class SummaryUnderRunTest(unittest.TestCase):
    """The stock DDP script in the default mode: no collective reports; each rank's summaries count the
    dp group's collectives (a gradient bucket per step, the checkpoint barriers) and their waits."""

    def test_summaries_count_the_dp_collectives_of_a_stock_script(self):
        d = tempfile.mkdtemp(prefix="shepherd-sum-")
        self.addCleanup(shutil.rmtree, d, True)
        outs, fake = run_ranks(self, open(STOCK).read(), world_size=2,
                               env={"SHEPHERD_PARALLELISM": "1,1,2", "SHEPHERD_CHECKPOINT_DIR": d},
                               args=["--steps", "10", "--ckpt-every", "5", "--ckpt-dir", d])
        for out in outs:
            self.assertEqual(out.returncode, 0, out.stdout.decode())
        self.assertEqual(fake.reports("collective"), [])
        completed = {}
        for rank in (0, 1):
            sums = [r for r in fake.reports("summary") if r["rank"] == rank]
            self.assertTrue(sums)
            dp = [g for r in sums for g in r["groups"] if g["group"] == "dp"]
            self.assertEqual({g["group"] for r in sums for g in r["groups"]}, {"dp"})
            count = sum(g["count"] for g in dp)
            self.assertGreaterEqual(count, 13)  # >= 10 buckets and 3 barriers
            completed[rank] = max(g["completed"] for g in dp)
            self.assertEqual(completed[rank], count - 1)  # seqs 0..count-1, each counted once
            self.assertTrue(all(g["wait_s"] >= 0 for g in dp))
            self.assertEqual([r["step"] for r in fake.reports("step") if r["rank"] == rank], list(range(1, 11)))
        self.assertEqual(completed[0], completed[1])  # seqs counted identically on both ranks


@unittest.skipUnless(HAVE_TORCH, "needs torch")
class PlainCollectivesUnderRunTest(unittest.TestCase):
    """torch.distributed calls on multi-element tensors (manual ZeRO, metrics): the byte count once asked a
    tensor for its truth value, the instrumentation failed and every such collective went unobserved."""

    def test_each_is_reported_begun_and_completed_with_its_bytes(self):
        out, fake = run_one_rank(self, COLLECTIVES_SCRIPT, env={"SHEPHERD_COLLECTIVE_REPORTS": "all"})
        self.assertEqual(out.returncode, 0, out.stdout.decode())
        self.assertNotIn("instrumentation of collective begin failed", out.stdout.decode())
        done = {r["op"]: r.get("bytes") for r in fake.reports("collective") if r["state"] == "completed"}
        self.assertEqual((done.get("all_reduce"), done.get("all_gather"), done.get("broadcast")), (16, 12, 16), done)


EVAL_SCRIPT = '''
import time, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
ddp = DDP(torch.nn.Linear(4, 1))
ddp.eval()
time.sleep(0.8)
ddp.module.train()
time.sleep(0.8)
dist.destroy_process_group()
'''


@unittest.skipUnless(HAVE_TORCH, "needs torch")
class EvalPhaseUnderRunTest(unittest.TestCase):
    def test_model_eval_and_train_switch_the_phase(self):
        out, fake = run_one_rank(self, EVAL_SCRIPT)
        self.assertEqual(out.returncode, 0, out.stdout.decode())
        phases = [h.get("phase") for h in fake.reports("heartbeat")]
        self.assertIn("eval", phases)
        # eval, then train again once the wrapped module is put back in training mode
        self.assertIn("train", phases[phases.index("eval"):])


# A script that skips the optimizer step when the loss is not finite (as GradScaler does on overflow, or
# Megatron's fp16 optimizer): NaN from iteration `first` on, or only at iteration `first` when ONCE.
SKIPPING_SCRIPT = """
import os, torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(8, 4), torch.randn(8, 1)
first, once = int(os.environ["NAN_FROM"]), os.environ.get("NAN_ONCE") == "1"
for i in range(8):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    if i == first or (i > first and not once):
        loss = loss * float("nan")
    loss.backward()
    if torch.isfinite(loss):
        opt.step()
"""


@unittest.skipUnless(HAVE_TORCH, "needs torch")
class SkippedNonFiniteStepsUnderRunTest(unittest.TestCase):
    """A loss that stays NaN while the script skips every step was never reported: the optimizer never
    stepped, and the zero-code client reported losses only with a step."""

    def losses(self, env):
        out, fake = run_one_rank(self, SKIPPING_SCRIPT, env=env)
        self.assertEqual(out.returncode, 0, out.stdout.decode())
        return [(r["step"], r.get("loss")) for r in fake.reports("step")]

    def test_a_loss_that_stays_nan_is_reported_once_for_the_step_in_progress(self):
        got = self.losses({"NAN_FROM": "3"})
        self.assertEqual([s for s, _ in got], [1, 2, 3, 4], got)
        self.assertTrue(all(isinstance(loss, float) for _, loss in got[:3]), got)
        self.assertEqual(got[3], (4, "nan"))

    def test_one_skipped_nan_iteration_is_not_reported(self):
        got = self.losses({"NAN_FROM": "3", "NAN_ONCE": "1"})
        self.assertEqual([s for s, _ in got], [1, 2, 3, 4, 5, 6, 7], got)
        self.assertTrue(all(isinstance(loss, float) for _, loss in got), got)


# Records the file each os.fsync reaches (the instrumentation looks os.fsync up when it calls it).
FILE_OBJECT_SAVES_SCRIPT = """
import os, torch
d = os.environ["SHEPHERD_CHECKPOINT_DIR"]
synced = []
real_fsync = os.fsync
def fsync(fd):
    synced.append(os.path.basename(os.readlink("/proc/self/fd/%d" % fd)))
    real_fsync(fd)
os.fsync = fsync
torch.save({"step": 3, "w": torch.ones(2)}, os.path.join(d, "by_path.pt"))
with open(os.path.join(d, "by_file.pt"), "wb") as f:
    torch.save({"step": 4, "w": torch.ones(2)}, f)
f = open(os.path.join(d, "by_open_file.pt"), "wb")
torch.save({"step": 5, "w": torch.ones(2)}, f)
f.close()
with open(os.path.join(d, "by_file.pt.tmp"), "wb") as f:
    torch.save({"step": 6, "w": torch.ones(2)}, f)
os.replace(os.path.join(d, "by_file.pt.tmp"), os.path.join(d, "renamed.pt"))
print("synced", " ".join(synced))
"""


@unittest.skipUnless(HAVE_TORCH, "needs torch")
class CheckpointToAFileObjectUnderRunTest(unittest.TestCase):
    """`with open(path, "wb") as f: torch.save(obj, f)` under the checkpoint dir was never reported: the
    rank's part of the checkpoint stayed pending and a fault restarted the job from scratch."""

    def test_a_save_to_an_open_named_file_is_fsynced_and_reported(self):
        d = tempfile.mkdtemp(prefix="shepherd-ckpt-")
        self.addCleanup(shutil.rmtree, d, True)
        out, fake = run_one_rank(self, FILE_OBJECT_SAVES_SCRIPT, env={"SHEPHERD_CHECKPOINT_DIR": d})
        text = out.stdout.decode()
        self.assertEqual(out.returncode, 0, text)
        self.assertEqual([(r["step"], r["path"]) for r in fake.reports("checkpoint")],
                         [(3, os.path.join(d, "by_path.pt")), (4, os.path.join(d, "by_file.pt")),
                          (5, os.path.join(d, "by_open_file.pt")), (6, os.path.join(d, "renamed.pt"))], text)
        synced = next(line.split()[1:] for line in text.splitlines() if line.startswith("synced"))
        self.assertTrue({"by_path.pt", "by_file.pt", "by_open_file.pt"} <= set(synced), text)


NEW_GROUP_SCRIPT = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
g = dist.new_group([0, 1, 2])
if dist.get_rank() == 1 and hasattr(dist, "get_process_group_ranks"):
    del dist.get_process_group_ranks  # as torch 1.13 releases lack it: membership from _pg_group_ranks
if dist.get_rank() in (0, 1, 2):
    dist.all_reduce(torch.ones(4), group=g)
    dist.barrier(group=g)
dist.barrier()
dist.destroy_process_group()
"""


@unittest.skipUnless(HAVE_TORCH, "needs torch")
class NonAxisGroupUnderRunTest(unittest.TestCase):
    """A collective on a group that is no TP/PP/DP line (`dist.new_group([0, 1, 2])` of a TP 2 x DP 2 job)
    carries its stable name on every member, and its first report its members, so the daemon can follow a
    wait in it."""

    def test_it_is_reported_with_its_g_name_and_members_on_every_member(self):
        outs, fake = run_ranks(self, NEW_GROUP_SCRIPT, world_size=4, env={"SHEPHERD_PARALLELISM": "2,1,2"})
        for out in outs:
            self.assertEqual(out.returncode, 0, out.stdout.decode())
        name = "g-" + hashlib.sha1(b"0,1,2").hexdigest()[:8]
        # The default mode: each member's summaries list the group by that name, its two collectives (an
        # all-reduce, seq 0, and a barrier, seq 1) completed, and its members on the first that lists it.
        self.assertEqual(fake.reports("collective"), [])
        ours = [(r["rank"], g) for r in fake.reports("summary") for g in r["groups"]
                if g["group"] not in ("tp", "dp", "world")]
        self.assertEqual({g["group"] for _, g in ours}, {name})
        self.assertEqual({rank for rank, _ in ours}, {0, 1, 2})
        for rank in (0, 1, 2):
            mine = [g for r, g in ours if r == rank]
            self.assertEqual(max(g["completed"] for g in mine), 1)
            self.assertEqual(sum(g["count"] for g in mine), 2)
            self.assertEqual(mine[0].get("members"), [0, 1, 2])
        # axis groups are placed by the daemon's coordinates alone
        self.assertTrue(all("members" not in g for r in fake.reports("summary") for g in r["groups"]
                            if g["group"] in ("tp", "dp", "world")))


class SavedStepTest(unittest.TestCase):
    """A checkpoint's step is the one the saved object holds: an ML engineer's background-thread save of a
    deep copy keyed "iteration" was reported at the step training had reached (35 for step_000020.pt)."""

    def test_the_saved_objects_step_key_wins_over_the_current_step(self):
        sys.path.insert(0, PKG)
        from shepherd_client.checkpoint_files import saved_step as _saved_step
        self.assertEqual(_saved_step({"iteration": 20, "model": {}}, 35), 20)
        self.assertEqual(_saved_step({"global_step": 7}, 9), 7)
        self.assertEqual(_saved_step({"step": 3, "iteration": 4}, 9), 3)
        self.assertEqual(_saved_step({"epoch": 2}, 9), 9)
        self.assertEqual(_saved_step({"step": True}, 9), 9)
        self.assertEqual(_saved_step([1, 2], 9), 9)


if __name__ == "__main__":
    unittest.main()
