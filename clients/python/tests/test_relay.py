"""Relayed delivery: with SHEPHERD_RELAY_DIR set (a rank its node's agent started), each batch becomes a file
in that directory for the agent's heartbeat to carry, and nothing is posted. Standard library only."""

import json
import os
import shutil
import sys
import tempfile
import time
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from fake_server import FakeDaemon  # noqa: E402
from shepherd_client import ShepherdClient  # noqa: E402
from shepherd_client import helper, transport  # noqa: E402
from shepherd_client.sender import ReportSender  # noqa: E402


def batch_files(directory):
    return sorted(n for n in os.listdir(directory) if not n.startswith("."))


def relayed(directory):
    """Every report in the directory's batch files, oldest file first (as the agent reads them)."""
    out = []
    for n in batch_files(directory):
        with open(os.path.join(directory, n)) as f:
            out.extend(json.load(f)["reports"])
    return out


def report(i, kind="step"):
    return {"rank": 5, "attempt": 2, "kind": kind, "step": i}


class WriteRelayTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, True)

    def test_a_batch_is_one_file_named_by_time_and_counter(self):
        before_ms = int(time.time() * 1000)
        res = transport.write_relay(self.dir, [report(1), report(2)])
        self.assertTrue(res.ok)
        names = os.listdir(self.dir)  # no .tmp left behind
        self.assertEqual(len(names), 1)
        name = names[0]
        self.assertRegex(name, r"^[0-9]{13}-[0-9]{6}\.json$")
        self.assertGreaterEqual(int(name[:13]), before_ms)
        self.assertLessEqual(int(name[:13]), int(time.time() * 1000))
        with open(os.path.join(self.dir, name)) as f:
            self.assertEqual(json.load(f), {"reports": [report(1), report(2)]})

    def test_files_sort_in_the_order_batches_were_written(self):
        for i in range(30):
            self.assertTrue(transport.write_relay(self.dir, [report(i)]).ok)
        self.assertEqual([r["step"] for r in relayed(self.dir)], list(range(30)))

    def test_a_large_batch_is_split_within_the_agent_s_per_rank_bounds(self):
        self.assertTrue(transport.write_relay(self.dir, [report(i) for i in range(600)]).ok)
        files = batch_files(self.dir)
        self.assertEqual(len(files), 3)  # 256 + 256 + 88
        for n in files:
            with open(os.path.join(self.dir, n), "rb") as f:
                body = f.read()
            self.assertLessEqual(len(body), 256 << 10)
            self.assertLessEqual(len(json.loads(body)["reports"]), 256)
        self.assertEqual([r["step"] for r in relayed(self.dir)], list(range(600)))

    def test_a_batch_over_the_byte_bound_is_split_by_bytes(self):
        big = [dict(report(i), path="/ckpt/" + "x" * 3000) for i in range(200)]  # ~600 KiB in all
        self.assertTrue(transport.write_relay(self.dir, big).ok)
        self.assertGreaterEqual(len(batch_files(self.dir)), 3)
        for n in batch_files(self.dir):
            self.assertLessEqual(os.path.getsize(os.path.join(self.dir, n)), 256 << 10)
        self.assertEqual([r["step"] for r in relayed(self.dir)], list(range(200)))

    def test_one_report_too_large_for_any_file_is_rejected_alone(self):
        res = transport.write_relay(self.dir, [report(1), dict(report(2), path="x" * (300 << 10)), report(3)])
        self.assertTrue(res.ok)
        self.assertEqual([r["index"] for r in res.rejected], [1])
        self.assertEqual([r["step"] for r in relayed(self.dir)], [1, 3])

    def test_with_64_files_pending_nothing_is_written_and_the_failure_is_transient(self):
        for i in range(64):
            self.assertTrue(transport.write_relay(self.dir, [report(i)]).ok)
        res = transport.write_relay(self.dir, [report(64)])
        self.assertFalse(res.ok)
        self.assertTrue(res.retry)
        self.assertEqual(len(batch_files(self.dir)), 64)

    def test_a_missing_directory_is_transient(self):
        res = transport.write_relay(os.path.join(self.dir, "gone"), [report(1)])
        self.assertFalse(res.ok)
        self.assertTrue(res.retry)

    def test_the_heartbeat_helper_delivers_through_the_relay_too(self):
        self.assertIs(helper.deliver, transport.deliver)
        with mock.patch.dict(os.environ, {"SHEPHERD_RELAY_DIR": self.dir}):
            res = helper.deliver("http://127.0.0.1:9/v1/jobs/j/reports", [report(1, "heartbeat")], token="t")
        self.assertTrue(res.ok)
        self.assertEqual(relayed(self.dir), [report(1, "heartbeat")])


class SenderRelayTest(unittest.TestCase):
    def setUp(self):
        self.d = FakeDaemon()
        self.addCleanup(self.d.close)
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, True)
        patch = mock.patch.dict(os.environ, {"SHEPHERD_RELAY_DIR": self.dir})
        patch.start()
        self.addCleanup(patch.stop)

    def test_a_full_directory_keeps_the_batch_in_memory_until_the_agent_takes_files(self):
        s = ReportSender(self.d.url + "/v1/jobs/job-000001/reports", interval_s=60)
        for i in range(64):
            self.assertTrue(transport.write_relay(self.dir, [report(i)]).ok)
        s.enqueue(report(100, "checkpoint"))
        self.assertFalse(s.flush())
        self.assertEqual(s.pending(), 1)
        for n in batch_files(self.dir):  # the agent's heartbeat was answered: it deletes what it sent
            os.unlink(os.path.join(self.dir, n))
        self.assertTrue(s.flush())
        self.assertEqual(s.pending(), 0)
        self.assertEqual(relayed(self.dir), [report(100, "checkpoint")])
        self.assertEqual(self.d.posts, [])

    def test_a_rank_writes_its_reports_for_the_agent_and_posts_nothing(self):
        env = {"SHEPHERD_URL": self.d.url, "SHEPHERD_JOB": "job-000001", "SHEPHERD_ATTEMPT": "2", "RANK": "5",
               "WORLD_SIZE": "8", "SHEPHERD_TOKEN": "rank-token", "SHEPHERD_HEARTBEAT_INTERVAL": "30"}
        c = ShepherdClient.from_env(env, start=True)
        self.addCleanup(c.close, False)
        c.step(1, loss=1.0)
        c.step(2, loss=0.5)
        # A checkpoint is urgent: written at once, not at the next heartbeat interval (30 s here).
        c.checkpoint_saved(2, "/ckpt/2")
        deadline = time.monotonic() + 20
        while not any(r["kind"] == "checkpoint" for r in relayed(self.dir)):
            self.assertLess(time.monotonic(), deadline, "the checkpoint report was not written")
            time.sleep(0.05)
        reports = relayed(self.dir)
        steps = [r["step"] for r in reports if r["kind"] == "step"]
        self.assertEqual(steps, [1, 2])
        ckpt = [r for r in reports if r["kind"] == "checkpoint"][0]
        self.assertEqual((ckpt["rank"], ckpt["attempt"], ckpt["step"], ckpt["path"]), (5, 2, 2, "/ckpt/2"))
        self.assertEqual(self.d.posts, [])


if __name__ == "__main__":
    unittest.main()
