"""shepherdctl against the real shepherdd on port 0 (tests/e2e/cluster.py's harness): a temporary database, a
small inventory registered over the API, a job whose ranks report as another launcher's would.

SHEPHERDD and SHEPHERDCTL name the binaries (ctest sets both); every wait is bounded by a deadline.
"""
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "../../../tests/e2e"))
from cluster import Cluster  # noqa: E402

CTL = os.environ.get("SHEPHERDCTL", os.path.join(HERE, "..", "shepherdctl"))

NODES = [("n1", "l0"), ("n2", "l0"), ("n3", "l1"), ("sp1", "l1")]


def job_body(gpus=8, tp=8, name="train"):
    return {"name": name,
            "model": {"parameters": 1e9, "layers": 8, "hidden": 1024, "heads": 8, "seq_len": 1024},
            "training": {"global_batch_size": 16},
            "parallelism": {"tp": tp, "pp": 1, "dp": gpus // tp},
            "resources": {"gpus": gpus}}


def run(*argv, env=None, stdin=None):
    full_env = dict(os.environ)
    full_env.pop("SHEPHERD_URL", None)
    full_env.pop("SHEPHERD_TOKEN_FILE", None)
    full_env.update(env or {})
    p = subprocess.run([sys.executable, CTL] + list(argv), capture_output=True, text=True, timeout=60,
                       env=full_env, input=stdin)
    return p.returncode, p.stdout, p.stderr


class CtlTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = Cluster()
        cls.url = cls.c.url
        for node, leaf in NODES:
            cls.c.api("POST", "/v1/nodes", {"id": node, "gpus": 8, "gpu_model": "H100-80GB",
                                            "topology": {"spine": "s0", "leaf": leaf}, "spare": node == "sp1"},
                      expect=201)
        cls.tmp = tempfile.mkdtemp(prefix="shepherdctl-test-")

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def ctl(self, *argv, expect=0):
        code, out, err = run("--server", self.url, *argv)
        self.assertEqual(code, expect, "shepherdctl %s -> %d\nstdout: %s\nstderr: %s" % (argv, code, out, err))
        return out, err

    def write(self, name, content):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(content if isinstance(content, str) else json.dumps(content))
        return path

    def submit(self, **kw):
        out, _ = self.ctl("submit", self.write("job-%s.json" % kw.get("name", "train"), job_body(**kw)), "-o",
                          "json")
        return json.loads(out)

    # ------------------------------------------------------------------------------------------ get
    def test_get_nodes_table_json_wide_and_filters(self):
        out, _ = self.ctl("get", "nodes")
        lines = out.strip().split("\n")
        self.assertEqual(lines[0].split()[:3], ["NODE", "STATE", "GPUS"])
        rows = {l.split()[0]: l.split() for l in lines[1:]}
        self.assertTrue({"n1", "n2", "n3", "sp1"} <= set(rows))
        self.assertEqual(rows["sp1"][1], "spare")
        # Aligned: every row's STATE column starts where the header's does.
        col = lines[0].index("STATE")
        self.assertTrue(all(l[col - 2:col] == "  " and l[col] != " " for l in lines[1:]))
        body = json.loads(self.ctl("get", "nodes", "-o", "json")[0])
        self.assertEqual(body["summary"]["nodes"], len(body["nodes"]))
        leaf1 = json.loads(self.ctl("get", "nodes", "-l", "leaf=l1", "-o", "json")[0])["nodes"]
        self.assertEqual(sorted(n["id"] for n in leaf1), ["n3", "sp1"])
        spares = json.loads(self.ctl("get", "nodes", "--state", "spare", "-o", "json")[0])["nodes"]
        self.assertEqual([n["id"] for n in spares], ["sp1"])
        self.assertIn("HOSTNAME", self.ctl("get", "nodes", "-o", "wide")[0])

    def test_get_jobs_failures_checkpoints_and_describe_show_reported_findings(self):
        job = self.submit(name="described")
        jid, token = job["id"], job.get("rank_token")
        self.assertTrue(token, job)
        now = time.time()
        reports = [{"rank": r, "attempt": job["current_attempt"]["number"] if job.get("current_attempt") else 1,
                    "time": now, "kind": "step", "step": 1, "loss": 2.0, "grad_norm": 1.0, "step_time_s": 0.5}
                   for r in range(8)]
        reports += [{"rank": r, "attempt": reports[0]["attempt"], "time": now, "kind": "checkpoint", "step": 1,
                     "path": "/ckpt/1", "scope": "replicated"} for r in range(1)]
        reports += [{"rank": r, "attempt": reports[0]["attempt"], "time": now + 1, "kind": "step", "step": 2,
                     "loss": "nan", "grad_norm": 1.0, "step_time_s": 0.5} for r in range(8)]
        self.c.api("POST", "/v1/jobs/%s/reports" % jid, {"reports": reports}, expect=202)
        failures = Cluster.wait_for(lambda: self.c.api("GET", "/v1/jobs/%s/failures" % jid)["failures"], 20,
                                    "a finding of %s" % jid)
        kind = failures[0]["kind"]

        out, _ = self.ctl("get", "jobs")
        row = [l for l in out.split("\n") if l.startswith(jid)]
        self.assertEqual(len(row), 1, out)
        self.assertIn("described", row[0])
        jobs = json.loads(self.ctl("get", "jobs", "-o", "json")[0])["jobs"]
        self.assertIn(jid, [j["id"] for j in jobs])

        out, _ = self.ctl("get", "failures", "--job", jid)
        self.assertIn(kind, out)
        self.assertIn(failures[0]["id"], out)
        self.assertEqual(json.loads(self.ctl("get", "failures", "--kind", "hang", "-o", "json")[0])["failures"], [])
        out, err = self.ctl("get", "failures", "--kind", "bogus", expect=1)
        self.assertIn("kind:", err)

        out, _ = self.ctl("get", "checkpoints", "--job", jid)
        self.assertIn("/ckpt/1", out)

        out, _ = self.ctl("describe", "job", jid)
        self.assertIn("Findings (%d)" % len(failures), out)
        self.assertIn(kind, out)
        self.assertIn("Checkpoints (1", out)
        self.assertIn("memory/GPU:", out)
        self.assertIn("Placement", out)
        described = json.loads(self.ctl("describe", "job", jid, "-o", "json")[0])
        self.assertEqual(described["job"]["id"], jid)
        goodput = described["goodput"]
        self.assertIsNotNone(goodput)
        self.assertRegex(out, r"Goodput: ETTR \d+\.\d% of [0-9.]+ s wall")
        for bucket in goodput["buckets"]:  # every bucket on a line of its own, with its share
            self.assertRegex(out, r"\n  %s +[0-9.]+ s +[0-9.]+ GPU-h +\d+\.\d%%" % bucket)
        self.assertIn("productive", goodput["buckets"])
        self.assertEqual(len(described["failures"]), len(failures))

        # The API refuses: a job another launcher starts cannot be restarted by Shepherd (409, exit 1).
        _, err = self.ctl("restart", jid, "--from", "latest", expect=1)
        self.assertEqual(len(err.strip().split("\n")), 1, err)
        out, _ = self.ctl("cancel", jid)
        self.assertIn("cancelled", out)

    def test_describe_node(self):
        out, _ = self.ctl("describe", "node", "n3")
        self.assertIn("node:        n3", out)
        self.assertIn("leaf=l1", out)
        _, err = self.ctl("describe", "node", "nope", expect=1)
        self.assertTrue(err.startswith("error: "), err)

    # ------------------------------------------------------------------------------------------ plan
    def test_plan_summary_and_emit(self):
        path = self.write("plan.json", job_body(gpus=16, tp=8))
        out, _ = self.ctl("plan", path)
        self.assertIn("fits:        yes", out)
        self.assertIn("tp 8", out)
        self.assertIn("dp 2", out)
        self.assertIn("TFLOP/s", out)
        answer = json.loads(self.ctl("plan", path, "-o", "json")[0])
        advised = answer["checkpoint_advice"]
        self.assertIn("checkpoint:  every %d s advised" % round(advised["interval_s"]), out)
        self.assertIn("expected ETTR %.1f%%" % (100 * advised["ettr_advised"]), out)
        out, _ = self.ctl("plan", path, "--emit", "megatron")
        argv = out.split()
        self.assertEqual(argv[argv.index("--tensor-model-parallel-size") + 1], "8")
        self.assertEqual(argv[argv.index("--global-batch-size") + 1], "16")
        out, _ = self.ctl("plan", path, "--emit", "torchtitan")
        argv = out.split()
        self.assertEqual(argv[argv.index("--parallelism.tensor_parallel_degree") + 1], "8")
        self.assertEqual(argv[argv.index("--training.global_batch_size") + 1], "16")
        answer = json.loads(self.ctl("plan", path, "-o", "json")[0])
        self.assertEqual(answer["launch_args"]["torchtitan"]["parallelism.tensor_parallel_degree"], 8)

    def test_a_plan_that_does_not_fit_says_so_and_exits_1(self):
        big = job_body(gpus=8, tp=8)
        big["model"]["parameters"] = 4e11
        out, err = self.ctl("plan", self.write("big.json", big), expect=1)
        self.assertIn("fits:        NO", out)
        self.assertIn("memory/GPU:", out)
        self.assertEqual(err, "error: the plan does not fit GPU memory\n")

    def test_a_422_names_the_field(self):
        bad = job_body(gpus=8, tp=3)
        bad["parallelism"]["dp"] = 1
        _, err = self.ctl("plan", self.write("bad.json", bad), expect=1)
        self.assertEqual(len(err.strip().split("\n")), 1, err)
        self.assertTrue(err.startswith("error: "), err)
        self.assertIn("parallelism.tp", err)
        _, err = self.ctl("submit", self.write("bad.json", bad), expect=1)
        self.assertIn("parallelism.tp", err)

    # ------------------------------------------------------------------------------------------ nodes
    def test_cordon_uncordon(self):
        out, _ = self.ctl("cordon", "n2", "--reason", "bad fan")
        self.assertIn("cordoned", out)
        node = self.c.api("GET", "/v1/nodes/n2")
        self.assertEqual((node["state"], node["reason"]), ("cordoned", "bad fan"))
        out, _ = self.ctl("uncordon", "n2")
        self.assertEqual(self.c.api("GET", "/v1/nodes/n2")["state"], "available")

    def test_drain_is_draining_while_ranks_run_then_drained(self):
        job = self.submit(name="drained", gpus=8, tp=8)
        node = Cluster.wait_for(lambda: (self.c.api("GET", "/v1/jobs/%s/placement" % job["id"]) or {}).get("ranks"),
                                20, "placement")[0]["node"]
        out, _ = self.ctl("drain", node, "--reason", "kernel upgrade")
        self.assertIn("draining", out)
        view = self.c.api("GET", "/v1/nodes/" + node)
        self.assertEqual(view["state"], "draining")
        self.assertEqual(view["jobs"], [job["id"]])  # its ranks keep running
        self.assertEqual(self.c.api("GET", "/v1/jobs/" + job["id"])["state"], job["state"])
        self.assertIn(node, self.ctl("get", "nodes", "--state", "draining")[0])
        # No new work lands on it.
        other = self.submit(name="after-drain", gpus=8, tp=8)
        ranks = Cluster.wait_for(lambda: (self.c.api("GET", "/v1/jobs/%s/placement" % other["id"]) or {}).get(
            "ranks"), 20, "placement of the second job")
        self.assertNotIn(node, {r["node"] for r in ranks})
        self.ctl("cancel", other["id"])
        self.ctl("cancel", job["id"])
        Cluster.wait_for(lambda: self.c.api("GET", "/v1/nodes/" + node)["state"] == "drained", 20, "drained")
        self.assertIn("drain", self.ctl("describe", "node", node)[0])
        self.ctl("uncordon", node)
        self.assertEqual(self.c.api("GET", "/v1/nodes/" + node)["state"], "available")

    def test_drain_needs_a_reason(self):
        _, err = self.ctl("drain", "n1", expect=2)
        self.assertIn("--reason", err)

    def test_drain_false_or_with_schedulable_true_is_422_naming_drain(self):
        for patch in ({"drain": False}, {"drain": True, "schedulable": True}, {"drain": "yes"}):
            body = self.c.api("PATCH", "/v1/nodes/n1", patch, expect=422)
            self.assertEqual([e["field"] for e in body["errors"]], ["drain"], (patch, body))
        self.assertEqual(self.c.api("GET", "/v1/nodes/n1")["state"], "available")

    # ------------------------------------------------------------------------------------------ top
    def test_top_prints_one_frame_without_a_terminal(self):
        out, _ = self.ctl("top")
        self.assertIn("nodes by state:", out)
        self.assertIn("JOB", out)

    # ------------------------------------------------------------------------------------------ errors
    def test_unknown_subcommand_and_flag_exit_2_in_one_line(self):
        for argv in (["frobnicate"], ["get", "nodes", "--bogus"], ["get", "pods"], []):
            code, out, err = run("--server", self.url, *argv)
            self.assertEqual(code, 2, (argv, out, err))
            self.assertEqual(len(err.strip().split("\n")), 1, err)
            self.assertNotIn("Traceback", err)

    def test_malformed_and_missing_files_exit_2(self):
        code, _, err = run("--server", self.url, "submit", self.write("broken.json", '{"name": '))
        self.assertEqual(code, 2, err)
        self.assertIn("not valid JSON", err)
        code, _, err = run("--server", self.url, "plan", os.path.join(self.tmp, "absent.json"))
        self.assertEqual(code, 2, err)
        self.assertNotIn("Traceback", err)

    def test_unreachable_server_exit_3(self):
        code, _, err = run("--server", "http://127.0.0.1:1", "get", "nodes")
        self.assertEqual(code, 3, err)
        self.assertEqual(len(err.strip().split("\n")), 1, err)
        code, _, err = run("get", "nodes", env={"SHEPHERD_URL": "http://127.0.0.1:1"})
        self.assertEqual(code, 3, err)

    def test_two_servers_first_unreachable(self):
        out, _ = self.ctl("--server", "http://127.0.0.1:1,%s" % self.url, "get", "nodes", "-o", "json")
        self.assertIn("n1", [n["id"] for n in json.loads(out)["nodes"]])
        code, out, err = run("get", "nodes", env={"SHEPHERD_URL": "http://127.0.0.1:1," + self.url})
        self.assertEqual(code, 0, err)


class Replica:
    """A replica that is not the leader: answers every request `status` (307/308 with Location: `leader` +
    the request's path, or 503 when it knows no leader). Records what it was asked."""

    def __init__(self, leader="", status=307):
        self.leader, self.status, self.seen = leader, status, []
        replica = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def answer(self):
                replica.seen.append((self.command, self.path))
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(replica.status)
                if replica.status in (307, 308):
                    self.send_header("Location", replica.leader + self.path)
                body = b'{"title": "no leader", "status": 503}' if replica.status == 503 else b""
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PATCH = answer  # noqa: N815 - http.server naming

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class CtlReplicasTest(unittest.TestCase):
    """Several replicas: a dead one, a follower redirecting to the leader (the real daemon), one that knows
    no leader, a redirect loop."""

    @classmethod
    def setUpClass(cls):
        cls.c = Cluster()
        cls.c.api("POST", "/v1/nodes", {"id": "r1", "gpus": 8, "topology": {"spine": "s0", "leaf": "l0"}},
                  expect=201)

    @classmethod
    def tearDownClass(cls):
        cls.c.close()

    def replica(self, leader="", status=307):
        r = Replica(leader, status)
        self.addCleanup(r.close)
        return r

    def test_a_followers_redirect_is_followed_for_reads_and_writes(self):
        follower = self.replica(self.c.url)
        servers = "http://127.0.0.1:1,%s" % follower.url  # the first one is dead
        code, out, err = run("--server", servers, "cordon", "r1", "--reason", "fan")
        self.assertEqual(code, 0, err)
        self.assertEqual(self.c.api("GET", "/v1/nodes/r1")["reason"], "fan")  # the PATCH and its body arrived
        self.assertEqual([m for m, _ in follower.seen], ["PATCH"])
        code, out, err = run("get", "nodes", "-o", "json", env={"SHEPHERD_URL": servers})
        self.assertEqual(code, 0, err)
        self.assertIn("r1", [n["id"] for n in json.loads(out)["nodes"]])
        code, _, err = run("--server", servers, "uncordon", "r1")
        self.assertEqual(code, 0, err)
        self.assertEqual(self.c.api("GET", "/v1/nodes/r1")["state"], "available")
        # 308 too.
        follower.status = 308
        code, out, err = run("--server", follower.url, "get", "nodes")
        self.assertEqual(code, 0, err)

    def test_a_replica_without_leader_is_skipped(self):
        lost = self.replica(status=503)
        code, out, err = run("--server", "%s,%s" % (lost.url, self.c.url), "get", "nodes", "-o", "json")
        self.assertEqual(code, 0, err)
        self.assertEqual(len(lost.seen), 1)
        code, out, err = run("--server", lost.url, "get", "nodes")
        self.assertEqual(code, 1, err)  # the only replica's own answer: the API's 503
        self.assertIn("no leader", err)

    def test_a_redirect_loop_stops_after_two_hops(self):
        a, b = self.replica(), self.replica()
        a.leader, b.leader = b.url, a.url
        code, out, err = run("--server", a.url, "get", "nodes")
        self.assertEqual(code, 3, err)
        self.assertIn("more than 2 redirects", err)
        self.assertEqual(len(err.strip().split("\n")), 1, err)
        self.assertEqual(len(a.seen) + len(b.seen), 3)


class CtlAuthTest(unittest.TestCase):
    ADMIN = "admin-token-0123456789abcdef"
    VIEWER = "viewer-token-0123456789abcdef"

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="shepherdctl-auth-")
        tokens = os.path.join(cls.tmp, "tokens.json")
        with open(tokens, "w") as f:
            json.dump({"tokens": [{"token": cls.ADMIN, "role": "admin", "name": "ops"},
                                  {"token": cls.VIEWER, "role": "viewer", "name": "grafana"}]}, f)
        os.chmod(tokens, 0o600)
        cls.c = Cluster({"tokens_file": tokens})

    @classmethod
    def tearDownClass(cls):
        cls.c.daemon.terminate()
        cls.c.daemon.wait(timeout=20)
        cls.c.daemon_log.close()

    def token_file(self, token):
        path = os.path.join(self.tmp, "tok-%d" % abs(hash(token)))
        with open(path, "w") as f:
            f.write(token + "\n")
        return path

    def test_wrong_or_missing_token_exit_4(self):
        for extra in (["--token-file", self.token_file("not-a-real-token-00000000")], []):
            code, out, err = run("--server", self.c.url, "get", "nodes", *extra)
            self.assertEqual(code, 4, (extra, out, err))
            self.assertEqual(len(err.strip().split("\n")), 1, err)

    def test_token_from_flag_and_environment(self):
        code, _, err = run("--server", self.c.url, "--token-file", self.token_file(self.ADMIN), "get", "nodes")
        self.assertEqual(code, 0, err)
        code, _, err = run("get", "jobs", env={"SHEPHERD_URL": self.c.url,
                                               "SHEPHERD_TOKEN_FILE": self.token_file(self.ADMIN)})
        self.assertEqual(code, 0, err)

    def test_a_viewer_may_not_cordon(self):
        code, _, err = run("--server", self.c.url, "--token-file", self.token_file(self.VIEWER), "cordon", "n1",
                           "--reason", "x")
        self.assertEqual(code, 4, err)


if __name__ == "__main__":
    unittest.main()
