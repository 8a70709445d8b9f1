"""Parameter hashes and checkpoint reports of real multi-rank torch runs (CPU, gloo, a fake daemon) whose
replicas or files are not what a plain DDP job's are. Each case is a healthy job once reported corrupt, or a
file once reported as a restart point. Skipped when torch is not installed."""

import os
import unittest

from test_instrument import HAVE_TORCH, run_ranks

ENV = {"SHEPHERD_PARALLELISM": "1,1,2", "SHEPHERD_SDC_EVERY": "2"}

# DDP with ZeroRedundancyOptimizer: each rank steps its local optimizer on its own shard, then the
# parameters are broadcast. Only after that are the replicas equal.
ZERO = '''
import torch, torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
dist.init_process_group("gloo")
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2)))
opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=0.1)
torch.manual_seed(1 + dist.get_rank())
for _ in range(6):
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
dist.barrier()  # no rank tears gloo down while another still reads the last broadcast
dist.destroy_process_group()
'''

# Post-local SGD: after its warm-up each replica steps on its own gradients, averaged every 4 steps.
LOCAL_SGD = '''
import torch, torch.distributed as dist
import torch.distributed.algorithms.model_averaging.averagers as averagers
from torch.distributed.algorithms.ddp_comm_hooks.post_localSGD_hook import PostLocalSGDState, post_localSGD_hook
from torch.distributed.optim import PostLocalSGDOptimizer
dist.init_process_group("gloo")
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 2))
alone = [dist.new_group([r]) for r in range(dist.get_world_size())][dist.get_rank()]  # no CUDA: no new_subgroups
model.register_comm_hook(PostLocalSGDState(process_group=None, subgroup=alone, start_localSGD_iter=2),
                         post_localSGD_hook)
opt = PostLocalSGDOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                            averagers.PeriodicModelAverager(period=4, warmup_steps=2))
torch.manual_seed(1 + dist.get_rank())
for _ in range(7):
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
dist.barrier()
dist.destroy_process_group()
'''

# Saves as the Hugging Face Trainer does: every rank its RNG states, rank 0 the model.
HF_STYLE = '''
import os, random, numpy, torch, torch.distributed as dist
dist.init_process_group("gloo")
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
d = os.path.join(os.environ["SHEPHERD_CHECKPOINT_DIR"], "checkpoint-2")
os.makedirs(d, exist_ok=True)
torch.save({"python": random.getstate(), "numpy": numpy.random.get_state(), "cpu": torch.random.get_rng_state()},
           os.path.join(d, "rng_state_%d.pth" % dist.get_rank()))
dist.barrier()
if dist.get_rank() == 0:
    torch.save({"model": model.state_dict(), "step": 2}, os.path.join(d, "model.pt"))
dist.barrier()
dist.destroy_process_group()
'''


# Every rank saves its own file, named for its rank: parts, not the whole state from the first to report.
PER_RANK = '''
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
opt.zero_grad()
model(torch.randn(4, 8)).sum().backward()
opt.step()
d = os.path.join(os.environ["SHEPHERD_CHECKPOINT_DIR"], "step_1")
os.makedirs(d, exist_ok=True)
torch.save({"model": model.state_dict()}, os.path.join(d, "rank_%d.pt" % dist.get_rank()))
if dist.get_rank() == 0:
    torch.save({"model": model.state_dict()}, os.path.join(d, "model.pt"))
dist.barrier()
dist.destroy_process_group()
'''


@unittest.skipUnless(HAVE_TORCH, "needs torch")
class ReplicasTest(unittest.TestCase):
    def hashes(self, fake):
        out = {}
        for r in fake.reports("param_hash"):
            out.setdefault(r["step"], {})[r["rank"]] = r["hash"]
        return out

    def test_zero_redundancy_optimizer_replicas_agree_after_each_step(self):
        outs, fake = run_ranks(self, ZERO, world_size=2, env=ENV)
        for out in outs:
            self.assertEqual(out.returncode, 0, out.stdout.decode())
        # One step per training step (not two: the local optimizer's inside ZeRO's), hashed after the sync.
        self.assertEqual(sorted(r["step"] for r in fake.reports("step") if r["rank"] == 0), [1, 2, 3, 4, 5, 6])
        hashes = self.hashes(fake)
        self.assertEqual(sorted(hashes), [2, 4, 6])
        for step, by_rank in hashes.items():
            self.assertEqual(len(set(by_rank.values())), 1, (step, by_rank))

    def test_post_local_sgd_reports_no_hashes(self):
        outs, fake = run_ranks(self, LOCAL_SGD, world_size=2, env=ENV)
        for out in outs:
            self.assertEqual(out.returncode, 0, out.stdout.decode())
            self.assertIn("periodic model averaging", out.stdout.decode())
        self.assertEqual(len([r for r in fake.reports("step") if r["rank"] == 0]), 7)
        self.assertEqual(fake.reports("param_hash"), [])

    def test_a_file_of_rng_states_is_no_checkpoint(self):
        d = self.temp_dir()
        outs, fake = run_ranks(self, HF_STYLE, world_size=2, env=dict(ENV, SHEPHERD_CHECKPOINT_DIR=d))
        for out in outs:
            self.assertEqual(out.returncode, 0, out.stdout.decode())
        self.assertTrue(os.path.exists(os.path.join(d, "checkpoint-2", "rng_state_1.pth")))
        self.assertEqual([(r["rank"], r["step"], os.path.basename(r["path"])) for r in fake.reports("checkpoint")],
                         [(0, 2, "model.pt")])

    def test_files_named_for_their_rank_are_parts_and_rank_0s_other_file_is_whole(self):
        d = self.temp_dir()
        outs, fake = run_ranks(self, PER_RANK, world_size=2, env=dict(ENV, SHEPHERD_CHECKPOINT_DIR=d))
        for out in outs:
            self.assertEqual(out.returncode, 0, out.stdout.decode())
        scopes = sorted((r["rank"], os.path.basename(r["path"]), r.get("scope", "part"))
                        for r in fake.reports("checkpoint"))
        self.assertEqual(scopes, [(0, "model.pt", "replicated"), (0, "rank_0.pt", "part"), (1, "rank_1.pt", "part")])

    def temp_dir(self):
        import shutil
        import tempfile
        d = tempfile.mkdtemp(prefix="shepherd-ckpt-")
        self.addCleanup(shutil.rmtree, d, True)
        return d


if __name__ == "__main__":
    unittest.main()
