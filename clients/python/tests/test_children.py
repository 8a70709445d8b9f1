"""Child processes of an instrumented rank never report as the rank (real runs, CPU torch, a fake daemon).

The failure this guards against: a script with `client = shepherd_client.install()` as its first line and a
DataLoader with spawned workers (each re-runs the script's top level as __mp_main__) got one client and one
heartbeat helper per worker, all reporting as the rank: "rank in no collective" while the rank itself was
stuck in one, so the hang went unseen. Skipped when torch is not installed."""

import os
import re
import sys
import unittest

from test_instrument import HAVE_TORCH, PKG, run_ranks

sys.path.insert(0, PKG)

# Counts the heartbeat helpers reporting to this job's daemon (its URL is on their command line).
HELPERS = '''
def helpers():
    url = os.environ["SHEPHERD_URL"].encode()
    n = 0
    for p in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                argv = f.read().split(b"\\0")
        except OSError:
            continue
        n += b"shepherd_client.helper" in argv and url in argv
    return n
'''

# install() at the top level, so spawned workers run it again. While its spawned workers live, the rank sits
# in an all-reduce at step 1000: any heartbeat of that window without them came from someone else.
SPAWNED_WORKERS_SCRIPT = '''
import shepherd_client
client = shepherd_client.install()
import multiprocessing, os, time
import torch
''' + HELPERS + '''

class Items(torch.utils.data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        time.sleep(0.2)
        return torch.tensor([os.getpid(), int(client.enabled)])


def child_state():
    return os.getpid(), int(client.enabled), helpers()


if __name__ == "__main__":
    client.set_step(1000)
    token = client.collective_begin("allreduce", "dp", 64)
    print("entered %.6f" % time.time(), flush=True)
    loader = torch.utils.data.DataLoader(Items(), batch_size=1, num_workers=2, multiprocessing_context="spawn")
    it = iter(loader)
    items = [next(it)[0].tolist() for _ in range(4)]  # both workers have run the top level by now
    time.sleep(1.0)  # a worker's helper, if any, heartbeats meanwhile
    print("loader workers", sorted({(pid, enabled) for pid, enabled in items}), "helpers", helpers(), flush=True)
    del it
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        pid, enabled, seen = pool.apply(child_state)
        time.sleep(1.0)
        print("pool worker", pid, enabled, "helpers", helpers(), "seen by it", seen, flush=True)
    print("left %.6f" % time.time(), flush=True)
    client.collective_end(token)
    client.step(1000, loss=0.5)
    client.flush()
    print("rank", os.getpid(), "done", flush=True)
'''

# A forked child inherits the rank's client and its unsent reports (step 5 is buffered at the fork); it exits
# normally, so its atexit handlers run. A subprocess inherits the rank's environment and calls install().
FORKED_AND_SUBPROCESS_SCRIPT = '''
import shepherd_client
client = shepherd_client.install()
import os, subprocess, sys
client.step(5, loss=0.25)
pid = os.fork()
if pid == 0:
    c = shepherd_client.install()
    print("forked child enabled", int(c.enabled), "same client", int(c is client), flush=True)
    c.step(777, loss=1.0)
    sys.exit(0)
os.waitpid(pid, 0)
out = subprocess.run([sys.executable, "-c", "import shepherd_client; c = shepherd_client.install(); "
                      "c.step(779, loss=1.0); c.flush(); print(int(c.enabled))"],
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
print("subprocess enabled", out.stdout.decode().strip(), flush=True)
client.step(6, loss=0.5)
client.flush()
'''


@unittest.skipUnless(HAVE_TORCH, "needs torch")
class SpawnedWorkersOfAnInstalledRankTest(unittest.TestCase):
    def test_only_the_rank_reports_and_its_collective_is_what_the_daemon_sees(self):
        (out,), fake = run_ranks(self, SPAWNED_WORKERS_SCRIPT, zero_code=False)
        text = out.stdout.decode()
        self.assertEqual(out.returncode, 0, text)
        # The workers ran the top level (their items say so) and got a disabled client, without a helper:
        # one helper in all, the rank's.
        workers = re.search(r"^loader workers (.*) helpers (\d+)$", text, re.M)
        self.assertIsNotNone(workers, text)
        pairs = re.findall(r"\((\d+), (\d+)\)", workers.group(1))
        self.assertEqual(len(pairs), 2, text)
        self.assertEqual({enabled for _, enabled in pairs}, {"0"}, text)
        self.assertEqual(workers.group(2), "1", text)
        pool = re.search(r"^pool worker (\d+) (\d) helpers (\d+) seen by it (\d+)$", text, re.M)
        self.assertIsNotNone(pool, text)
        self.assertEqual(pool.group(2, 3, 4), ("0", "1", "1"), text)
        # Every heartbeat of the window says what the rank's state was: step 1000, inside the all-reduce.
        entered = float(re.search(r"^entered (\S+)$", text, re.M).group(1))
        left = float(re.search(r"^left (\S+)$", text, re.M).group(1))
        window = [h for h in fake.reports("heartbeat") if entered + 0.1 < h["time"] < left]
        self.assertGreaterEqual(len(window), 5, text)
        strays = [h for h in window if h.get("step") != 1000 or (h.get("collective") or {}).get("op") != "allreduce"]
        self.assertEqual(strays, [], text)
        self.assertEqual({h["rank"] for h in fake.reports()}, {0})
        # The rank's own reports still arrive.
        self.assertEqual([(r["step"], r["loss"]) for r in fake.reports("step")], [(1000, 0.5)])
        dp = [g for r in fake.reports("summary") for g in r["groups"] if g["group"] == "dp"]
        self.assertEqual((max(g["completed"] for g in dp), sum(g["count"] for g in dp)), (0, 1))


@unittest.skipUnless(HAVE_TORCH, "needs torch")
class ForkedChildAndSubprocessOfAnInstalledRankTest(unittest.TestCase):
    def test_neither_reports_and_the_rank_still_does(self):
        (out,), fake = run_ranks(self, FORKED_AND_SUBPROCESS_SCRIPT, zero_code=False)
        text = out.stdout.decode()
        self.assertEqual(out.returncode, 0, text)
        self.assertIn("forked child enabled 0 same client 0", text)
        self.assertIn("subprocess enabled 0", text)
        # Step 5 once (the forked child's copy of the unsent buffer stayed unsent), none of the children's.
        self.assertEqual([r["step"] for r in fake.reports("step")], [5, 6], text)
        self.assertTrue(fake.reports("heartbeat"))


@unittest.skipUnless(HAVE_TORCH, "needs torch")
class ZeroCodeRankTest(unittest.TestCase):
    def test_a_script_that_calls_install_under_run_keeps_the_rank_and_its_spawned_workers_stay_quiet(self):
        (out,), fake = run_ranks(self, SPAWNED_WORKERS_SCRIPT)
        text = out.stdout.decode()
        self.assertEqual(out.returncode, 0, text)
        self.assertIn("helpers 1\n", text)
        self.assertEqual([r["step"] for r in fake.reports("step")], [1000])
        self.assertEqual(len(fake.reports("finished")), 1)


class ChildDetectionTest(unittest.TestCase):
    def test_an_inherited_pid_other_than_ours_marks_a_child(self):
        from shepherd_client.lineage import CLIENT_PID_ENV, inherited_from_rank

        me = os.getpid()
        self.assertFalse(inherited_from_rank({}))  # the rank as the agent starts it (a fresh attempt too)
        self.assertFalse(inherited_from_rank({CLIENT_PID_ENV: str(me)}))  # the rank itself, after install()
        self.assertTrue(inherited_from_rank({CLIENT_PID_ENV: str(me + 1)}))
        self.assertTrue(inherited_from_rank({CLIENT_PID_ENV: "garbage"}))

    def test_from_env_in_a_child_is_disabled(self):
        from shepherd_client import ShepherdClient
        from shepherd_client.lineage import CLIENT_PID_ENV

        env = {"SHEPHERD_URL": "http://127.0.0.1:9", "SHEPHERD_JOB": "j", "RANK": "3", "WORLD_SIZE": "4"}
        c = ShepherdClient.from_env(dict(env, **{CLIENT_PID_ENV: str(os.getpid() + 1)}), start=False)
        self.assertFalse(c.enabled)
        self.assertEqual(c.rank, 3)
        c = ShepherdClient.from_env(env, start=False)
        self.assertTrue(c.enabled)
        c.close(flush=False)


if __name__ == "__main__":
    unittest.main()
