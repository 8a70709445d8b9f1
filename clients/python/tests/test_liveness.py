"""GIL-independent liveness: the progress page, the helper process that heartbeats from it, and group names.
Standard library only (no torch)."""

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

from fake_server import FakeDaemon

PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, PKG)
from shepherd_client.groups import group_name, parse_layout  # noqa: E402
from shepherd_client.helper import process_state  # noqa: E402
from shepherd_client.progress_page import ProgressPage  # noqa: E402

# A "rank": starts the helper, enters step 7 and an all-reduce, then blocks in a C call holding the GIL.
RANK = textwrap.dedent("""
    import ctypes, sys
    from shepherd_client import ShepherdClient
    c = ShepherdClient.from_env()
    assert c.start_helper()
    c.set_step(7)
    c.collective_begin("allreduce", "dp", 4096)
    print("helper", c.helper_pid, flush=True)
    ctypes.PyDLL(None).sleep(int(sys.argv[1]))  # PyDLL: the GIL stays held for the whole call
""")


class ProgressPageTest(unittest.TestCase):
    def test_reader_sees_what_the_writer_published(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "p")
            w = ProgressPage.create(path)
            r = ProgressPage.open(path)
            s = r.read()
            self.assertIsNone(s["step"])
            self.assertIsNone(s["collective"])
            w.write(41, "checkpoint_save", (5, "allreduce", "dp", 1000.5), step_since=999.0)
            s = r.read()
            self.assertEqual((s["step"], s["phase"], s["step_since"], s["pid"]), (41, "checkpoint_save", 999.0, os.getpid()))
            self.assertEqual(s["collective"], {"seq": 5, "op": "allreduce", "group": "dp", "since": 1000.5})
            self.assertFalse(s["closed"])
            w.write(42, "train", None, closed=True)
            s = r.read()
            self.assertEqual((s["step"], s["collective"], s["closed"]), (42, None, True))
            w.close(unlink=True)
            r.close()
            self.assertFalse(os.path.exists(path))

    def test_a_file_or_symlink_already_at_the_path_is_never_written(self):
        # The path is predictable: another user could make it first (mode 0666) and then write the liveness
        # the helper reports, or point it at a file of the rank's user. The page is always a new file.
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "p")
            with open(path, "wb") as planted:
                planted.write(b"planted")
            os.chmod(path, 0o666)
            kept = os.open(path, os.O_RDONLY)
            self.addCleanup(os.close, kept)
            inode = os.fstat(kept).st_ino
            w = ProgressPage.create(path)
            self.assertNotEqual(os.stat(path).st_ino, inode)
            self.assertEqual(os.pread(kept, 64, 0), b"planted")
            self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
            w.close(unlink=True)
            target = os.path.join(d, "target")
            with open(target, "wb") as t:
                t.write(b"keep")
            os.symlink(target, path)
            w = ProgressPage.create(path)
            self.assertFalse(os.path.islink(path))
            with open(target, "rb") as t:
                self.assertEqual(t.read(), b"keep")
            w.close(unlink=True)

    def test_a_file_that_is_not_a_page_is_refused(self):
        with tempfile.NamedTemporaryFile() as f:
            f.write(b"x" * 256)
            f.flush()
            with self.assertRaises(ValueError):
                ProgressPage.open(f.name)


class GroupNameTest(unittest.TestCase):
    def test_names_from_members_and_layout(self):
        self.assertEqual(parse_layout("2,2,2", 8), (2, 2, 2))
        self.assertEqual(parse_layout(None, 4), (1, 1, 4))
        self.assertEqual(parse_layout("2,2,2", 4), (1, 1, 4))  # inconsistent: ignored
        self.assertEqual(group_name(range(4), (1, 1, 4)), "dp")  # a pure DP job's WORLD
        self.assertEqual(group_name([0], (1, 1, 1)), "dp")
        # TP=2, PP=2, DP=2: rank = tp + 2·(dp + 2·pp)
        lay = (2, 2, 2)
        self.assertEqual(group_name([4, 5], lay), "tp")  # tp 0,1 at pp 1, dp 0
        self.assertEqual(group_name([1, 3], lay), "dp")  # dp 0,1 at tp 1, pp 0
        self.assertEqual(group_name([2, 6], lay), "pp")  # pp 0,1 at tp 0, dp 1
        self.assertEqual(group_name(range(8), lay), "world")
        other = group_name([0, 3, 5], lay)
        self.assertRegex(other, r"^g-[0-9a-f]{8}$")
        self.assertEqual(group_name([5, 0, 3], lay), other)  # stable for any member order

    def test_context_parallel_groups(self):
        # TP=2, PP=1, DP=2, CP=2 ("2,1,2,2"): rank = tp + 2·(cp + 2·dp)
        lay = parse_layout("2,1,2,2", 8)
        self.assertEqual(lay, (2, 1, 2, 2))
        self.assertEqual(parse_layout("2,1,2,2", 16), (1, 1, 16))  # inconsistent: ignored
        self.assertEqual(group_name([0, 2], lay), "cp")  # cp 0,1 at tp 0, dp 0
        self.assertEqual(group_name([5, 7], lay), "cp")  # cp 0,1 at tp 1, dp 1
        self.assertEqual(group_name([1, 5], lay), "dp")  # dp 0,1 at tp 1, cp 0
        self.assertEqual(group_name([6, 7], lay), "tp")  # tp 0,1 at cp 1, dp 1
        self.assertEqual(group_name(range(8), lay), "world")
        self.assertEqual(group_name(range(4), parse_layout("1,1,1,4", 4)), "cp")  # only CP > 1
        self.assertRegex(group_name([0, 1, 2, 3], lay), r"^g-")  # tp × cp block: no single axis


class HelperTest(unittest.TestCase):
    def setUp(self):
        self.fake = FakeDaemon()
        self.pages = tempfile.TemporaryDirectory()
        env = dict(os.environ, PYTHONPATH=PKG, SHEPHERD_URL=self.fake.url, SHEPHERD_JOB="job-l", RANK="3",
                   WORLD_SIZE="4", SHEPHERD_HEARTBEAT_INTERVAL="0.1", SHEPHERD_PROGRESS_DIR=self.pages.name)
        self.rank = subprocess.Popen([sys.executable, "-c", RANK, "600"], env=env, stdout=subprocess.PIPE)
        line = self.rank.stdout.readline().decode().split()
        self.assertEqual(line[0], "helper")
        self.helper = int(line[1])

    def tearDown(self):
        self.rank.kill()
        self.rank.wait()
        self.rank.stdout.close()
        self.fake.close()
        self.pages.cleanup()

    def heartbeats(self):
        return [r for r in self.fake.reports("heartbeat") if r["rank"] == 3]

    def test_rank_holding_the_gil_still_heartbeats_inside_its_collective(self):
        n = len(self.heartbeats())
        hbs = self.fake.wait_for(lambda: self.heartbeats()[n + 5:], 20, "5 heartbeats while the GIL is held")
        for hb in hbs:
            self.assertEqual(hb["step"], 7)
            self.assertEqual((hb["collective"]["seq"], hb["collective"]["op"], hb["collective"]["group"]),
                             (0, "allreduce", "dp"))
        self.assertEqual(process_state(self.rank.pid), "S")  # the rank itself is blocked in sleep()

    def test_helper_exits_when_the_rank_dies_and_removes_the_page(self):
        self.fake.wait_for(lambda: self.heartbeats(), 20, "a first heartbeat")
        self.assertEqual(len(os.listdir(self.pages.name)), 1)  # shepherd-job-l-a1-r3-<pid>.page
        self.rank.kill()  # SIGKILL: the rank removes nothing
        self.rank.wait()
        self.fake.wait_for(lambda: process_state(self.helper) in (None, "Z"), 20, "the helper to exit")
        self.fake.wait_for(lambda: not os.listdir(self.pages.name), 20, "the page removed")

    def test_helper_stops_on_sigterm_and_removes_the_page(self):
        # SIGTERM (the agent stopping the rank's group) ends the helper's loop at its next turn; the handler
        # only sets a flag, so no SystemExit lands inside urllib ("Exception ignored" in the rank's log).
        # Heartbeats while the rank holds the GIL come from the helper: its handler is installed by then.
        n = len(self.heartbeats())
        self.fake.wait_for(lambda: self.heartbeats()[n + 3:], 20, "3 heartbeats from the helper")
        os.kill(self.helper, signal.SIGTERM)
        self.fake.wait_for(lambda: process_state(self.helper) in (None, "Z"), 20, "the helper to exit")
        self.fake.wait_for(lambda: not os.listdir(self.pages.name), 20, "the page removed")
        self.assertEqual(process_state(self.rank.pid), "S")  # the rank itself runs on

    def test_no_heartbeat_while_the_rank_is_stopped(self):
        self.fake.wait_for(lambda: self.heartbeats(), 20, "a first heartbeat")
        os.kill(self.rank.pid, signal.SIGSTOP)
        try:
            self.fake.wait_for(lambda: process_state(self.rank.pid) == "T", 10, "the rank stopped")
            time.sleep(0.3)  # let a heartbeat already in flight land
            n = len(self.heartbeats())
            # Bounded check of absence: ten helper intervals without a heartbeat.
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                self.assertEqual(len(self.heartbeats()), n)
                time.sleep(0.05)
        finally:
            os.kill(self.rank.pid, signal.SIGCONT)
        self.fake.wait_for(lambda: len(self.heartbeats()) > n, 20, "heartbeats again after SIGCONT")


class HelperPageNameTest(unittest.TestCase):
    """The page's name is only for removal: the helper maps the rank's page through the inherited descriptor
    (a page whose name was gone before its helper opened it left a rank without a helper under load), and
    removes the name at exit only while it still names that page."""

    def setUp(self):
        self.fake = FakeDaemon()
        self.addCleanup(self.fake.close)
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.path = os.path.join(self.dir.name, "shepherd-job-n-a1-r0-1.page")

    def start_helper(self, page):
        helper = subprocess.Popen(
            [sys.executable, "-m", "shepherd_client.helper", "--page", self.path, "--page-fd", str(page.fileno()),
             "--parent", str(os.getpid()), "--url", self.fake.url, "--job", "job-n", "--rank", "0",
             "--attempt", "1", "--interval", "0.1"],
            env=dict(os.environ, PYTHONPATH=PKG), pass_fds=(page.fileno(),))
        self.addCleanup(helper.wait)
        self.addCleanup(helper.kill)
        return helper

    def test_a_page_whose_name_is_gone_is_still_heartbeated(self):
        page = ProgressPage.create(self.path)
        self.addCleanup(page.close)
        page.write(step=4, phase="train", collective=None)
        os.unlink(self.path)
        self.start_helper(page)
        hb = self.fake.wait_for(lambda: self.fake.reports("heartbeat")[2:], 20, "heartbeats from the helper")
        self.assertEqual({r["step"] for r in hb}, {4})

    def test_a_name_that_now_names_another_page_is_not_removed(self):
        page = ProgressPage.create(self.path)
        self.addCleanup(page.close)
        helper = self.start_helper(page)
        self.fake.wait_for(lambda: self.fake.reports("heartbeat"), 20, "a first heartbeat")
        os.unlink(self.path)
        newer = ProgressPage.create(self.path)  # a later process with the same pid
        self.addCleanup(newer.close)
        helper.terminate()
        helper.wait(timeout=20)
        self.assertTrue(os.path.exists(self.path))
        self.assertEqual(os.stat(self.path).st_ino, os.fstat(newer.fileno()).st_ino)



# A rank whose interpreter teardown is slow: the client closes at exit, then a handler registered before it
# (atexit runs last-in first-out) keeps the process alive, as torch's teardown can on a busy machine.
SLOW_EXIT = textwrap.dedent("""
    import atexit, sys, time
    atexit.register(time.sleep, 1.5)
    from shepherd_client import ShepherdClient
    c = ShepherdClient.from_env()
    assert c.start_helper()
    c.set_step(9)
    print("helper", c.helper_pid, flush=True)
    sys.stdin.readline()  # the test lets it exit once the helper heartbeats
""")


class SlowExitTest(unittest.TestCase):
    def test_heartbeats_continue_through_interpreter_teardown_and_stop_with_the_rank(self):
        fake = FakeDaemon()
        self.addCleanup(fake.close)
        env = dict(os.environ, PYTHONPATH=PKG, SHEPHERD_URL=fake.url, SHEPHERD_JOB="job-x", RANK="1",
                   WORLD_SIZE="2", SHEPHERD_HEARTBEAT_INTERVAL="0.1")
        rank = subprocess.Popen([sys.executable, "-c", SLOW_EXIT], env=env, stdout=subprocess.PIPE,
                                stdin=subprocess.PIPE)
        self.addCleanup(rank.stdout.close)
        helper = int(rank.stdout.readline().decode().split()[1])
        fake.wait_for(lambda: len(fake.reports("heartbeat")) >= 3, 20, "the helper heartbeating")
        rank.communicate(b"\n", timeout=30)
        self.assertEqual(rank.returncode, 0)
        ended = time.time()
        # Heartbeats were sent during the 1.5 s after the client closed (the last ones near the end).
        beats = [r["time"] for r in fake.reports("heartbeat")]
        self.assertTrue(beats and max(beats) > ended - 0.6, (beats[-3:], ended))
        fake.wait_for(lambda: process_state(helper) in (None, "Z"), 20, "the helper to exit with the rank")


if __name__ == "__main__":
    unittest.main()
