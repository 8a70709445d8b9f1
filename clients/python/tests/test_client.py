"""Unit tests of the rank client against a fake report endpoint. Standard library only; the parameter-hash
tests on real tensors run only where torch imports."""

import json
import logging
import math
import os
import socket
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from fake_server import FakeDaemon  # noqa: E402
from shepherd_client import ShepherdClient, encode_metric, param_digest  # noqa: E402
from shepherd_client import client as client_mod  # noqa: E402
from shepherd_client import transport  # noqa: E402
from shepherd_client.config import config_from_env, parse_coords  # noqa: E402
from shepherd_client.sender import hold_off_s  # noqa: E402

try:
    import warnings

    warnings.filterwarnings("ignore", category=UserWarning)
    import torch  # noqa: F401
except Exception:  # noqa: BLE001 - any import failure means "no torch here"
    torch = None


def free_closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def env_for(url, **extra):
    env = {"SHEPHERD_URL": url, "SHEPHERD_JOB": "job-000001", "SHEPHERD_ATTEMPT": "2", "RANK": "5",
           "WORLD_SIZE": "8", "SHEPHERD_RANK_COORDS": "1,0,2", "SHEPHERD_TOKEN": ""}
    env.update(extra)
    return env


class ConfigTest(unittest.TestCase):
    def test_from_env_reads_every_variable(self):
        c = ShepherdClient.from_env(env_for("http://h:1/", SHEPHERD_RESUME_CHECKPOINT="/ckpt/step-40",
                                            SHEPHERD_TOKEN="s3cret", SHEPHERD_HEARTBEAT_INTERVAL="0.5"),
                                    start=False)
        try:
            self.assertTrue(c.enabled)
            self.assertEqual(c.config.url, "http://h:1")
            self.assertEqual((c.job, c.attempt, c.rank, c.world_size), ("job-000001", 2, 5, 8))
            self.assertEqual(c.coords, (1, 0, 2))
            self.assertEqual(c.resume_checkpoint, "/ckpt/step-40")
            self.assertEqual(c.config.token, "s3cret")
            self.assertEqual(c.config.heartbeat_interval_s, 0.5)
        finally:
            c.close(flush=False)

    def test_defaults_and_malformed_values(self):
        with self.assertLogs("shepherd_client", "WARNING"):
            cfg = config_from_env({"SHEPHERD_URL": "http://x", "RANK": "abc", "SHEPHERD_RANK_COORDS": "1,2",
                                   "SHEPHERD_HEARTBEAT_INTERVAL": "-1", "SHEPHERD_RESUME_CHECKPOINT": " "})
        self.assertEqual((cfg.rank, cfg.world_size, cfg.attempt), (0, 1, 1))
        self.assertIsNone(cfg.coords)
        self.assertIsNone(cfg.resume_checkpoint)
        self.assertEqual(cfg.heartbeat_interval_s, 1.0)
        self.assertEqual(parse_coords("0, 3 ,1"), (0, 3, 1))
        self.assertEqual(parse_coords("1,0,2,3"), (1, 0, 2, 3))  # context parallel: a fourth value

    def test_a_plain_srun_rank_takes_slurms_variables(self):
        cfg = config_from_env({"SHEPHERD_URL": "http://x", "SHEPHERD_JOB": "job-000001", "SLURM_PROCID": "3",
                               "SLURM_NTASKS": "4", "SLURM_RESTART_COUNT": "2", "SLURMD_NODENAME": "n3"})
        self.assertEqual((cfg.rank, cfg.world_size, cfg.attempt, cfg.node), (3, 4, 3, "n3"))
        # Shepherd's own variables win where both are set (shepherd-slurm-rank sets them under srun).
        cfg = config_from_env({"SHEPHERD_URL": "http://x", "RANK": "1", "WORLD_SIZE": "2", "SHEPHERD_ATTEMPT": "5",
                               "SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_RESTART_COUNT": "0"})
        self.assertEqual((cfg.rank, cfg.world_size, cfg.attempt, cfg.node), (1, 2, 5, ""))

    def test_without_shepherd_job_a_srun_rank_binds_by_slurm_job_id(self):
        cfg = config_from_env({"SHEPHERD_URL": "http://x", "SLURM_JOB_ID": "4242", "SLURM_JOB_NAME": "train",
                               "SLURM_PROCID": "1", "SLURM_NTASKS": "4",
                               "SHEPHERD_POLICY": '{"external_remediation": "requeue"}'})
        self.assertTrue(cfg.bound_by_slurm)
        self.assertEqual(cfg.envelope(), {"slurm": {"ntasks": 4, "job_name": "train",
                                                    "policy": {"external_remediation": "requeue"}}})
        # SHEPHERD_JOB wins: the rank reports to the job it was given, with no envelope.
        cfg = config_from_env({"SHEPHERD_URL": "http://x", "SHEPHERD_JOB": "job-000007", "SLURM_JOB_ID": "4242"})
        self.assertFalse(cfg.bound_by_slurm)
        self.assertIsNone(cfg.envelope())
        with self.assertLogs("shepherd_client", "WARNING"):
            cfg = config_from_env({"SHEPHERD_URL": "http://x", "SLURM_JOB_ID": "9", "SHEPHERD_POLICY": "[1]"})
        self.assertEqual(cfg.envelope(), {"slurm": {"ntasks": 1}})

    def test_disabled_without_url_is_a_silent_no_op(self):
        threads = threading.active_count()
        c = ShepherdClient.from_env({"RANK": "3", "WORLD_SIZE": "4"})
        self.assertFalse(c.enabled)
        self.assertEqual(threading.active_count(), threads)  # no heartbeat thread
        self.assertEqual(c.rank, 3)
        self.assertIsNone(c.resume_checkpoint)
        with c.collective("allreduce") as seq:
            self.assertEqual(seq, 0)
        with c.checkpoint_phase("save"):
            self.assertEqual(c.phase, "checkpoint_save")
        c.step(1, float("nan"), 1.0, 0.1)
        c.checkpoint_saved(1, "/x")
        self.assertEqual(c.param_hash(1, b"abc"), param_digest(b"abc"))
        self.assertTrue(c.flush())
        c.close()
        c.close()


class ReportTest(unittest.TestCase):
    def setUp(self):
        self.d = FakeDaemon()
        self.addCleanup(self.d.close)

    def client(self, start=False, **extra):
        c = ShepherdClient.from_env(env_for(self.d.url, **extra), start=start)
        self.addCleanup(c.close, False)
        return c

    def test_post_shape_and_common_fields(self):
        c = self.client(SHEPHERD_TOKEN="tok")
        c.step(7, loss=2.5, grad_norm=0.75, step_time_s=0.125, lr=3e-4)
        self.assertTrue(c.flush())
        post = self.d.posts[0]
        self.assertEqual(post["path"], "/v1/jobs/job-000001/reports")
        self.assertEqual(post["headers"]["Content-Type"], "application/json")
        self.assertEqual(post["headers"]["Authorization"], "Bearer tok")
        self.assertEqual(list(post["body"].keys()), ["reports"])
        r = post["body"]["reports"][0]
        self.assertEqual({k: r[k] for k in ("rank", "attempt", "kind", "step", "loss", "grad_norm",
                                            "step_time_s", "lr")},
                         {"rank": 5, "attempt": 2, "kind": "step", "step": 7, "loss": 2.5, "grad_norm": 0.75,
                          "step_time_s": 0.125, "lr": 3e-4})
        self.assertIsInstance(r["time"], float)
        self.assertLess(abs(r["time"] - time.time()), 5)

    def test_reports_name_the_node_the_launcher_gave(self):
        c = self.client(SLURMD_NODENAME="n3")
        c.step(1, 1.0)
        c.flush()
        self.assertEqual(self.d.reports("step")[0]["node"], "n3")

    def test_a_srun_rank_without_shepherd_job_posts_to_the_slurm_binding_route(self):
        env = {"SHEPHERD_URL": self.d.url, "SHEPHERD_TOKEN": "tok", "SLURM_JOB_ID": "4242",
               "SLURM_JOB_NAME": "train", "SLURM_PROCID": "2", "SLURM_NTASKS": "4", "SLURM_RESTART_COUNT": "1",
               "SLURMD_NODENAME": "n2"}
        c = ShepherdClient.from_env(env, start=False)
        self.addCleanup(c.close, False)
        c.step(3, 1.5)
        self.assertTrue(c.flush())
        post = self.d.posts[0]
        self.assertEqual(post["path"], "/v1/external/slurm/4242/reports")
        self.assertEqual(post["body"]["slurm"], {"ntasks": 4, "job_name": "train"})
        r = post["body"]["reports"][0]
        self.assertEqual((r["rank"], r["attempt"], r["node"], r["step"]), (2, 2, "n2", 3))

    def test_no_authorization_header_without_token(self):
        c = self.client()
        c.step(1, 1.0)
        c.flush()
        self.assertNotIn("Authorization", self.d.posts[0]["headers"])

    def test_non_finite_metrics_are_strings(self):
        c = self.client()
        c.step(1, loss=float("nan"), grad_norm=float("inf"), step_time_s=float("nan"), lr=float("nan"))
        c.step(2, loss=float("-inf"), grad_norm=None)
        c.flush()
        a, b = self.d.reports("step")
        self.assertEqual((a["loss"], a["grad_norm"]), ("nan", "inf"))
        self.assertNotIn("step_time_s", a)  # the daemon only takes a finite number >= 0
        self.assertNotIn("lr", a)
        self.assertEqual(b["loss"], "-inf")
        self.assertNotIn("grad_norm", b)
        self.assertEqual(encode_metric(3), 3.0)
        self.assertEqual(encode_metric("x"), None)

    def test_checkpoint_marker_names_job_and_attempt(self):
        import tempfile
        from shepherd_client.client import checkpoint_owner
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "step-10.pt")
            with open(path, "wb") as f:
                f.write(b"state")
            c = self.client()
            self.assertIsNone(checkpoint_owner(path))
            c.checkpoint_saved(10, path)
            self.assertEqual(checkpoint_owner(path), {"job": "job-000001", "attempt": 2, "rank": 5, "step": 10})
            c.checkpoint_saved(11, os.path.join(d, "missing.pt"))  # no file, no marker, still reported
            self.assertFalse(os.path.exists(os.path.join(d, "missing.pt.shepherd.json")))
            c.flush()
            self.assertEqual([r["step"] for r in self.d.reports("checkpoint")], [10, 11])

    def test_collective_checkpoint_and_hash_shapes(self):
        c = self.client(SHEPHERD_COLLECTIVE_REPORTS="all")  # per-collective reports (debugging)
        with c.collective("allreduce", group="dp"):
            c.flush()  # still open: `started` goes out
        c.checkpoint_saved(10, "/ckpt/step-10")
        digest = c.param_hash(10, {"w": b"\x00\x01"})
        c.flush()
        started, completed = self.d.reports("collective")
        self.assertEqual({k: started[k] for k in ("seq", "op", "group", "state")},
                         {"seq": 0, "op": "allreduce", "group": "dp", "state": "started"})
        self.assertEqual(completed["state"], "completed")
        self.assertEqual(completed["seq"], 0)
        ck = self.d.reports("checkpoint")[0]
        self.assertEqual((ck["step"], ck["path"]), (10, "/ckpt/step-10"))
        ph = self.d.reports("param_hash")[0]
        self.assertEqual((ph["step"], ph["hash"]), (10, digest))
        int(digest, 16)

    def test_a_named_group_s_members_ride_on_its_first_report_then_every_30_s(self):
        c = self.client(SHEPHERD_COLLECTIVE_REPORTS="all")  # per-collective reports (debugging)
        with c.collective("allreduce", group="g-9805b47f", members=[2, 0, 1]):
            pass  # `started` withdrawn: `completed` carries the members
        with c.collective("allreduce", group="g-9805b47f", members=[2, 0, 1]):
            c.flush()  # still open: `started` goes out, without them (sent less than 30 s ago)
        with c.collective("allreduce", group="dp"):
            pass
        c._members_sent["g-9805b47f"] -= client_mod.MEMBERS_EVERY_S  # 30 s later
        with c.collective("allreduce", group="g-9805b47f", members=[0, 1, 2]):
            c.flush()
        c.flush()
        self.assertEqual([(r["group"], r["seq"], r["state"], r.get("members"))
                          for r in self.d.reports("collective")],
                         [("g-9805b47f", 0, "completed", [0, 1, 2]), ("g-9805b47f", 1, "started", None),
                          ("g-9805b47f", 1, "completed", None), ("dp", 0, "completed", None),
                          ("g-9805b47f", 2, "started", [0, 1, 2]), ("g-9805b47f", 2, "completed", [0, 1, 2])])

    def test_started_is_withdrawn_when_completed_before_sending(self):
        c = self.client(SHEPHERD_COLLECTIVE_REPORTS="all")  # per-collective reports (debugging)
        for _ in range(3):
            with c.collective("allreduce"):
                pass
        c.flush()
        states = [(r["seq"], r["state"]) for r in self.d.reports("collective")]
        self.assertEqual(states, [(0, "completed"), (1, "completed"), (2, "completed")])

    def test_seq_counts_per_group(self):
        c = self.client(SHEPHERD_COLLECTIVE_REPORTS="all")  # per-collective reports (debugging)
        seqs = []
        for g in ("dp", "tp", "dp", "pp", "dp", "tp"):
            with c.collective("allreduce", group=g) as s:
                seqs.append((g, s))
        self.assertEqual(seqs, [("dp", 0), ("tp", 0), ("dp", 1), ("pp", 0), ("dp", 2), ("tp", 1)])
        c.flush()
        self.assertEqual([(r["group"], r["seq"]) for r in self.d.reports("collective")], seqs)

    def test_completed_only_and_none_modes(self):
        c = self.client(SHEPHERD_COLLECTIVE_REPORTS="completed")
        with c.collective("allreduce"):
            c.flush()
        c.flush()
        self.assertEqual([r["state"] for r in self.d.reports("collective")], ["completed"])
        c2 = self.client(SHEPHERD_COLLECTIVE_REPORTS="none")
        with c2.collective("allreduce"):
            c2.heartbeat()
            c2.flush()
        c2.flush()
        self.assertEqual(len(self.d.reports("collective")), 1)
        self.assertEqual(self.d.reports("heartbeat")[-1]["collective"]["seq"], 0)

    def test_heartbeat_thread_reports_open_collective_with_since(self):
        c = self.client(start=True, SHEPHERD_HEARTBEAT_INTERVAL="0.05")
        c.set_step(12)
        before = time.time()
        with c.collective("allgather", group="tp"):
            hb = self.d.wait_for(lambda: [r for r in self.d.reports("heartbeat") if "collective" in r][-2:]
                                 if len([r for r in self.d.reports("heartbeat") if "collective" in r]) >= 2
                                 else None, what="two heartbeats inside the collective")
        for r in hb:
            self.assertEqual(r["collective"]["seq"], 0)
            self.assertEqual(r["collective"]["op"], "allgather")
            self.assertEqual(r["collective"]["group"], "tp")
            self.assertGreaterEqual(r["collective"]["since"], before - 0.01)
            self.assertLessEqual(r["collective"]["since"], r["time"])
            self.assertEqual(r["step"], 12)
            self.assertEqual(r["phase"], "train")
        self.assertEqual(hb[0]["collective"]["since"], hb[1]["collective"]["since"])
        n = len(self.d.reports("heartbeat"))
        self.d.wait_for(lambda: len(self.d.reports("heartbeat")) > n + 1, what="heartbeats after it")
        self.assertNotIn("collective", self.d.reports("heartbeat")[-1])

    def test_heartbeats_arrive_at_the_interval(self):
        c = self.client(start=True, SHEPHERD_HEARTBEAT_INTERVAL="0.1")
        time.sleep(0.75)
        c.close()
        n = len(self.d.reports("heartbeat"))
        self.assertTrue(4 <= n <= 10, n)

    def test_checkpoint_phase_during_saves_and_loads(self):
        c = self.client()
        with c.checkpoint_phase("save"):
            c.flush()
            self.assertEqual(self.d.reports("heartbeat")[-1]["phase"], "checkpoint_save")
        with c.checkpoint_phase("load"):
            c.flush()
            self.assertEqual(self.d.reports("heartbeat")[-1]["phase"], "checkpoint_load")
        c.flush()
        self.assertEqual(self.d.reports("heartbeat")[-1]["phase"], "train")
        with self.assertRaises(ValueError):
            with c.checkpoint_phase("nap"):
                pass

    def test_eval_phase_and_set_phase(self):
        c = self.client()
        with c.eval_phase():
            c.flush()
            self.assertEqual(self.d.reports("heartbeat")[-1]["phase"], "eval")
            self.assertEqual(c.phase, "eval")
        c.flush()
        self.assertEqual(self.d.reports("heartbeat")[-1]["phase"], "train")
        c.set_phase("eval")
        c.flush()
        n = len(self.d.reports("heartbeat"))
        c.set_phase("eval")  # no change: no extra heartbeat
        c.flush()
        self.assertEqual(len(self.d.reports("heartbeat")), n)
        with self.assertRaises(ValueError):
            c.set_phase("lunch")
        with self.assertRaises(ValueError):
            with c.checkpoint_phase("eval"):
                pass

    def test_reports_keep_their_order_across_a_transient_failure(self):
        c = self.client()
        self.d.status = 503
        for s in range(1, 4):
            c.step(s, 1.0)
        with self.assertLogs("shepherd_client", "WARNING"):
            self.assertFalse(c.flush())
        self.d.status = 202
        c.step(4, 1.0)
        self.assertTrue(c.flush())
        self.assertEqual([r["step"] for r in self.d.reports("step")], [1, 2, 3, 4])

    def test_permanent_rejection_is_dropped_not_retried(self):
        c = self.client()
        self.d.status = 404
        c.step(1, 1.0)
        with self.assertLogs("shepherd_client", "WARNING"):
            self.assertFalse(c.flush())  # the batch was dropped: it did not reach the daemon
        self.d.status = 202
        c.step(2, 1.0)
        self.assertTrue(c.flush())
        self.assertEqual([r["step"] for r in self.d.reports("step")], [2])
        self.assertEqual(c.stats["dropped"], 1)

    def test_429_retry_after_holds_the_sender_back_with_jitter(self):
        c = self.client()
        self.d.status = 429
        self.d.extra_headers = {"Retry-After": "2"}
        c.step(1, 1.0)
        with self.assertLogs("shepherd_client", "WARNING"):
            self.assertFalse(c.flush())
        wait = c._sender._retry_at - time.monotonic()
        self.assertGreater(wait, 1.9)  # at least the 2 s asked for (less the few ms since the answer)
        self.assertLess(wait, 3.0)  # jitter adds at most half
        self.assertEqual(hold_off_s(2.0, 0.0), 2.0)
        self.assertEqual(hold_off_s(2.0, 0.999), 2.0 * 1.4995)
        self.assertEqual(hold_off_s(100.0, 0.5), 60.0)

    def test_buffer_is_bounded(self):
        c = ShepherdClient.from_env(env_for("http://127.0.0.1:%d" % free_closed_port()), start=False,
                                    max_buffer=5)
        self.addCleanup(c.close, False)
        for s in range(20):
            c.step(s, 1.0)
        self.assertEqual(c._sender.pending(), 5)
        self.assertEqual(c.stats["dropped"], 15)


class NetworkFailureTest(unittest.TestCase):
    def test_unreachable_daemon_never_raises_and_logs_rarely(self):
        url = "http://127.0.0.1:%d" % free_closed_port()
        c = ShepherdClient.from_env(env_for(url, SHEPHERD_HEARTBEAT_INTERVAL="0.02"))
        with self.assertLogs("shepherd_client", "WARNING") as logs:
            for s in range(50):
                c.set_step(s)
                with c.collective("allreduce"):
                    pass
                c.step(s, float("nan"), 1.0, 0.01)
                with c.checkpoint_phase("save"):
                    pass
                c.checkpoint_saved(s, "/x")
                c.param_hash(s, b"x")
                time.sleep(0.005)
            self.assertFalse(c.flush())
            t0 = time.monotonic()
            c.close()
            self.assertLess(time.monotonic() - t0, 5)
        self.assertGreater(c.stats["failed_posts"], 10)
        self.assertLess(len(logs.records), c.stats["failed_posts"] / 5)  # once per 30 failures

    def test_timeout_on_a_silent_server(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(5)  # accepts connections, never answers
        self.addCleanup(s.close)
        c = ShepherdClient.from_env(env_for("http://127.0.0.1:%d" % s.getsockname()[1],
                                            SHEPHERD_HTTP_TIMEOUT="0.2"), start=False)
        c.step(1, 1.0)
        t0 = time.monotonic()
        with self.assertLogs("shepherd_client", "WARNING"):
            self.assertFalse(c.flush())
        self.assertLess(time.monotonic() - t0, 2)
        c.close(flush=False)

    def test_a_redirect_is_not_followed_and_no_proxy_is_used(self):
        # A tester's server answered 302: urllib resent the POST as a GET without its body, with the token,
        # and the client counted the lost batch as delivered. And http_proxy from the rank's environment
        # carried the token to the proxy.
        d = FakeDaemon()
        self.addCleanup(d.close)
        d.status = 302
        d.extra_headers = {"Location": d.url + "/elsewhere"}
        r = transport.post_reports(d.url + "/v1/jobs/j/reports", [{"kind": "step"}], token="t0123456789abcdef")
        self.assertFalse(r.ok)
        self.assertIn("redirected to %s/elsewhere: not followed" % d.url, r.detail)
        self.assertEqual(len(d.posts), 1)  # the one POST: nothing followed the redirect
        d.status = 202
        proxy = FakeDaemon()  # would record the POST if the client went through it
        self.addCleanup(proxy.close)
        old = {k: os.environ.get(k) for k in ("http_proxy", "HTTP_PROXY", "no_proxy", "NO_PROXY")}
        self.addCleanup(lambda: [os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
                                 for k, v in old.items()])
        for k in ("no_proxy", "NO_PROXY"):
            os.environ.pop(k, None)
        os.environ["http_proxy"] = os.environ["HTTP_PROXY"] = proxy.url
        r = transport.post_reports(d.url + "/v1/jobs/j/reports", [{"kind": "step"}], token="t0123456789abcdef")
        self.assertTrue(r.ok, r.detail)
        self.assertEqual(len(d.posts), 2)
        self.assertEqual(proxy.posts, [])

    def test_unencodable_values_do_not_raise(self):
        d = FakeDaemon()
        self.addCleanup(d.close)
        c = ShepherdClient.from_env(env_for(d.url), start=False)
        c.checkpoint_saved(1, "/ok")
        c._sender.enqueue({"kind": "step", "bad": object()})
        with self.assertLogs("shepherd_client", "WARNING"):
            c.flush()
        c.close()


class HugeAnswerServer:
    """An http.server on 127.0.0.1:0 answering every POST 200 with `size` bytes, announced in Content-Length
    (`announce`) or not (the body ends when the connection closes)."""

    def __init__(self, size, announce):
        import http.server

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def do_POST(self):  # noqa: N802 - http.server naming
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if announce:
                    self.send_header("Content-Length", str(size))
                self.end_headers()
                chunk = b"x" * 65536
                try:
                    sent = 0
                    while sent < size:
                        self.wfile.write(chunk[: min(len(chunk), size - sent)])
                        sent += len(chunk)
                except OSError:  # the client stopped reading
                    pass

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class AnswerSizeTest(unittest.TestCase):
    # The client read answers of any size into memory: a server behind SHEPHERD_URL could exhaust the rank.
    def test_an_answer_over_the_limit_is_refused_not_buffered(self):
        for announce in (False, True):
            server = HugeAnswerServer(transport.MAX_ANSWER_BYTES + (1 << 20), announce)
            self.addCleanup(server.close)
            r = transport.post_reports(server.url + "/v1/jobs/j/reports", [{"kind": "step"}], timeout_s=10)
            self.assertFalse(r.ok)
            self.assertFalse(r.retry)  # answered 2xx: the batch is not sent again
            self.assertIn("limit", r.detail)

    def test_an_answer_within_the_limit_is_read(self):
        server = HugeAnswerServer(1 << 20, False)
        self.addCleanup(server.close)
        r = transport.post_reports(server.url + "/v1/jobs/j/reports", [{"kind": "step"}], timeout_s=10)
        self.assertTrue(r.ok, r.detail)


class ResumeCheckTest(unittest.TestCase):
    """One checkpoint directory mixed rank files of two attempts (an old attempt's rank still saving): such a
    checkpoint is never resumed from."""

    def setUp(self):
        import tempfile

        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.dir = os.path.join(self.tmp.name, "step_000100")
        os.makedirs(self.dir)

    def save(self, rank, attempt, step=100):
        path = os.path.join(self.dir, "rank_%d.pt" % rank)
        with open(path, "wb") as f:
            f.write(b"state")
        client_mod.write_checkpoint_marker(path, "job-000001", attempt, rank, step)
        return path

    def env(self, path, attempt="2", step="100"):
        return env_for("http://127.0.0.1:1", SHEPHERD_RESUME_CHECKPOINT=path, SHEPHERD_RESUME_ATTEMPT=attempt,
                       SHEPHERD_RESUME_STEP=step, SHEPHERD_ATTEMPT="3")

    def test_a_checkpoint_whose_files_all_come_from_the_completing_attempt_is_resumed(self):
        path = self.save(0, 2)
        self.save(1, 2)
        cfg = config_from_env(self.env(path))
        self.assertEqual(cfg.resume_checkpoint, path)
        self.assertEqual(cfg.resume_refused, "")

    def test_files_of_two_attempts_in_one_checkpoint_are_refused(self):
        path = self.save(0, 2)
        self.save(1, 1)  # the old attempt's rank 1 overwrote its part after attempt 2 saved
        with self.assertLogs("shepherd_client", "ERROR"):
            cfg = config_from_env(self.env(path))
        self.assertIsNone(cfg.resume_checkpoint)
        self.assertIn("attempts 1, 2", cfg.resume_refused)

    def test_a_file_another_attempt_wrote_is_refused(self):
        path = self.save(0, 1)
        with self.assertLogs("shepherd_client", "ERROR"):
            cfg = config_from_env(self.env(path))
        self.assertIsNone(cfg.resume_checkpoint)
        self.assertIn("attempt 1, not attempt 2", cfg.resume_refused)
        # Another step's markers in the same directory do not count; an unmarked file is not refused.
        other = os.path.join(self.tmp.name, "flat")
        os.makedirs(other)
        unmarked = os.path.join(other, "step-100.pt")
        open(unmarked, "wb").close()
        client_mod.write_checkpoint_marker(unmarked + ".old", "job-000001", 1, 0, 90)
        self.assertEqual(config_from_env(self.env(unmarked)).resume_checkpoint, unmarked)


class ParamDigestTest(unittest.TestCase):
    def test_bytes_and_mappings(self):
        self.assertEqual(param_digest({"a": b"1", "b": b"2"}), param_digest({"a": b"1", "b": b"2"}))
        self.assertNotEqual(param_digest({"a": b"1", "b": b"2"}), param_digest({"a": b"1", "b": b"3"}))
        self.assertNotEqual(param_digest({"a": b"12"}), param_digest({"a1": b"2"}))
        self.assertEqual(len(param_digest(b"")), 64)

    @unittest.skipIf(torch is None, "torch is not importable in this interpreter")
    def test_torch_module_hash_is_deterministic_and_sensitive(self):
        def model():
            torch.manual_seed(0)
            return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))

        a, b = model(), model()
        d = FakeDaemon()
        self.addCleanup(d.close)
        c = ShepherdClient.from_env(env_for(d.url), start=False)
        self.addCleanup(c.close, False)
        h = c.param_hash(3, a)
        self.assertEqual(h, param_digest(b))
        self.assertEqual(h, param_digest(a.state_dict()))
        with torch.no_grad():
            b[0].weight.view(-1)[0] += 1e-3
        self.assertNotEqual(h, param_digest(b))
        # A non-contiguous view hashes like its contiguous copy; bf16 goes through the integer view.
        t = torch.arange(12.0).reshape(3, 4)
        self.assertEqual(param_digest({"t": t.t()}), param_digest({"t": t.t().contiguous()}))
        self.assertEqual(len(param_digest({"t": t.to(torch.bfloat16)})), 64)
        c.flush()
        self.assertEqual(d.reports("param_hash")[0]["hash"], h)

    @unittest.skipIf(torch is None, "torch is not importable in this interpreter")
    def test_a_module_hash_covers_its_parameters_not_its_buffers(self):
        # BatchNorm's running statistics follow each rank's own batches: replicas with equal parameters
        # must hash alike whatever their buffers hold, and a changed parameter must still show.
        def model():
            torch.manual_seed(0)
            return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 2))

        a, b = model(), model()
        a.train()
        b.train()
        a(torch.randn(16, 4))
        b(torch.randn(16, 4) * 5)
        self.assertFalse(torch.equal(a[1].running_mean, b[1].running_mean))
        self.assertEqual(param_digest(a), param_digest(b))
        with torch.no_grad():
            b[1].weight.view(-1)[0] += 1e-3
        self.assertNotEqual(param_digest(a), param_digest(b))


if __name__ == "__main__":
    logging.basicConfig()
    unittest.main()
