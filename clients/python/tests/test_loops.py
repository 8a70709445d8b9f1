"""Training loops other than the textbook one, run for real (CPU torch, gloo, one rank, a fake daemon): what
the client counts as a step, the loss it reports, the phase, and the checkpoints it reports. Each case once
made the daemon act wrongly. Skipped when torch is not installed."""

import os
import shutil
import tempfile
import unittest

from test_instrument import HAVE_TORCH, run_ranks

PRELUDE = '''
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
torch.manual_seed(0)
def batch():
    return torch.randn(4, 8)
'''

# A WGAN's critic steps 5 times per generator step; the script saves its generator iteration as "step".
GAN = PRELUDE + '''
G, D = torch.nn.Linear(8, 8), torch.nn.Linear(8, 1)
opt_g, opt_d = torch.optim.SGD(G.parameters(), lr=0.01), torch.optim.SGD(D.parameters(), lr=0.01)
for it in range(1, 5):
    for _ in range(5):
        opt_d.zero_grad()
        D(G(batch()).detach()).mean().backward()
        opt_d.step()
    opt_g.zero_grad()
    (-D(G(batch())).mean()).backward()
    opt_g.step()
    if it % 2 == 0:
        torch.save({"step": it, "G": G.state_dict(), "D": D.state_dict()},
                   os.path.join(os.environ["SHEPHERD_CHECKPOINT_DIR"], "it_%d.pt" % it))
'''

# A linear probe (the head's optimizer) for 3 steps, then full fine-tuning; beside it, an optimizer that
# steps every 4th iteration and happens to step first.
PHASES = PRELUDE + '''
body, head = torch.nn.Linear(8, 8), torch.nn.Linear(8, 1)
opt_head = torch.optim.SGD(head.parameters(), lr=0.01)
for _ in range(3):
    opt_head.zero_grad()
    head(body(batch())).mean().backward()
    opt_head.step()
opt_all = torch.optim.SGD(list(body.parameters()) + list(head.parameters()), lr=0.01)
for _ in range(20):
    opt_all.zero_grad()
    head(body(batch())).mean().backward()
    opt_all.step()
'''

SLOW_FIRST = PRELUDE + '''
body, head = torch.nn.Linear(8, 8), torch.nn.Linear(8, 1)
opt_head, opt = torch.optim.SGD(head.parameters(), lr=0.01), torch.optim.SGD(body.parameters(), lr=0.01)
for it in range(1, 25):
    opt.zero_grad(); opt_head.zero_grad()
    head(body(batch())).mean().backward()
    if (it - 1) % 4 == 0:
        opt_head.step()
    opt.step()
'''

# Mean teacher: two backward() per step, the second a ramped consistency term; the loss reported is their
# sum, not the last one.
TWO_LOSSES = PRELUDE + '''
m = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(m.parameters(), lr=0.0)
for it in range(1, 4):
    opt.zero_grad()
    sup = m(batch()).mean() * 0 + 1.0
    sup.backward()
    cons = m(batch()).mean() * 0 + 0.25 * it
    cons.backward()
    opt.step()
'''

# An EMA copy of the DDP model (AveragedModel deep-copies the wrapper) evaluated in eval mode, and the DDP
# model itself left in eval mode while it trains (fine-tuning with frozen BatchNorm statistics).
EMA = PRELUDE + '''
import time
from torch.optim.swa_utils import AveragedModel
ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
ema = AveragedModel(ddp)
ema.eval()
print("phase after ema.eval()", shepherd_client.install().phase, flush=True)
ddp.eval()
print("phase after ddp.eval()", shepherd_client.install().phase, flush=True)
opt.zero_grad(); ddp(batch()).mean().backward(); opt.step()
print("phase after a step", shepherd_client.install().phase, flush=True)
'''

# A checkpoint written into a temporary directory renamed into place, and one to "<name>.partial".
RENAMES = PRELUDE + '''
d = os.environ["SHEPHERD_CHECKPOINT_DIR"]
m = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(m.parameters(), lr=0.01)
opt.zero_grad(); m(batch()).mean().backward(); opt.step()
os.makedirs(os.path.join(d, "tmp-step_1"))
torch.save({"model": m.state_dict()}, os.path.join(d, "tmp-step_1", "state.pt"))
os.replace(os.path.join(d, "tmp-step_1"), os.path.join(d, "step_1"))
torch.save({"model": m.state_dict()}, os.path.join(d, "last.pt.partial"))
os.replace(os.path.join(d, "last.pt.partial"), os.path.join(d, "last.pt"))
'''


@unittest.skipUnless(HAVE_TORCH, "needs torch")
class LoopShapesTest(unittest.TestCase):
    def run_one(self, body, env=None):
        d = tempfile.mkdtemp(prefix="shepherd-ckpt-")
        self.addCleanup(shutil.rmtree, d, True)
        (out,), fake = run_ranks(self, body, env=dict(env or {}, SHEPHERD_CHECKPOINT_DIR=d))
        self.assertEqual(out.returncode, 0, out.stdout.decode())
        return out.stdout.decode(), fake, d

    def test_a_gans_checkpoints_are_numbered_in_the_steps_counted(self):
        # The critic steps most: 5 per iteration, 20 in all. The saves (on the training thread) are at its
        # steps 10 and 20, the units of the hash checks and onsets, not at the script's iterations 2 and 4.
        _, fake, d = self.run_one(GAN)
        self.assertEqual([r["step"] for r in fake.reports("step")][-1], 20)
        self.assertEqual([(r["step"], os.path.basename(r["path"])) for r in fake.reports("checkpoint")],
                         [(10, "it_2.pt"), (20, "it_4.pt")])

    def test_the_optimizer_of_a_later_phase_takes_over(self):
        _, fake, _ = self.run_one(PHASES)
        steps = [r["step"] for r in fake.reports("step")]
        self.assertGreaterEqual(steps[-1], 15, steps)  # was stuck at 3
        self.assertEqual(steps, list(range(1, len(steps) + 1)))

    def test_an_optimizer_stepping_every_fourth_iteration_first_is_not_the_training_step(self):
        _, fake, _ = self.run_one(SLOW_FIRST)
        steps = [r["step"] for r in fake.reports("step")]
        self.assertGreaterEqual(len(steps), 22, steps)  # 24 iterations; was 6

    def test_the_loss_is_the_sum_of_the_steps_backward_scalars(self):
        _, fake, _ = self.run_one(TWO_LOSSES)
        self.assertEqual([(r["step"], r["loss"]) for r in fake.reports("step")], [(1, 1.25), (2, 1.5), (3, 1.75)])

    def test_an_ema_copys_eval_is_no_eval_phase_and_a_training_step_ends_one(self):
        text, _, _ = self.run_one("import shepherd_client\n" + EMA)
        self.assertIn("phase after ema.eval() train", text)
        self.assertIn("phase after ddp.eval() eval", text)
        self.assertIn("phase after a step train", text)

    def test_a_renamed_temporary_directory_or_partial_file_is_reported_at_its_final_path(self):
        _, fake, d = self.run_one(RENAMES)
        self.assertEqual([r["path"] for r in fake.reports("checkpoint")],
                         [os.path.join(d, "step_1", "state.pt"), os.path.join(d, "last.pt")])


if __name__ == "__main__":
    unittest.main()
