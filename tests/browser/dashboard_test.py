"""The dashboard in a real browser: headless Chromium driven over the W3C WebDriver protocol (Debian's
chromium + chromium-driver; a standard-library client below) against the real shepherdd on port 0, with an
inventory, a cordoned node, a running job whose ranks this test simulates by posting reports over HTTP, and
a fault (a rank's loss NaN) injected while the page is open.

Every expected number comes from this file's own setup, not from the API. Screenshots are saved under
$SHEPHERD_ARTIFACTS (default: ./test-artifacts) and named in the output. Exits 77 (ctest: skipped) when
chromium or chromedriver is not installed.
"""

import re
import base64
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_UI = os.path.normpath(os.path.join(HERE, "..", "..", "ui"))
SHEPHERDD = os.environ.get("SHEPHERDD", "")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
ARTIFACTS = os.path.abspath(os.environ.get("SHEPHERD_ARTIFACTS", "test-artifacts"))

ADMIN = "ui-admin-token-0123456789abcdef"
VIEWER = "ui-viewer-token-0123456789abcdef"
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"

# The fleet: 3 leaves under 2 spines, 4 nodes each, 8 GPUs per node; one spare, one cordoned by the test.
LEAVES = {("s0", "l0"): 4, ("s0", "l1"): 4, ("s1", "l2"): 4}
SPARE = "n07"
CORDONED = "n11"
CORDON_REASON = "fan failure in tray 2"
JOB_NODES = 2
RANKS = 16  # 2 nodes x 8 GPUs, one rank per GPU
STEPS = 5
LATE_RANK = 5  # stops reporting while the others heartbeat: the rank grid shows it late

DEADLINE_S = 60.0  # per wait; generous for a loaded 2-core machine


def wait_for(what, probe, deadline_s=DEADLINE_S, every_s=0.1):
    """Polls `probe` until it returns a truthy value; fails naming `what` (and the last value) at the deadline."""
    end = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < end:
        try:
            last = probe()
        except Exception as e:  # a page mid-render, a daemon not yet listening
            last = e
        if last and not isinstance(last, Exception):
            return last
        time.sleep(every_s)
    raise AssertionError("timed out waiting for %s (last: %r)" % (what, last))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    def __init__(self, workdir):
        self.workdir = workdir
        nodes = []
        i = 0
        for (spine, leaf), count in LEAVES.items():
            for _ in range(count):
                node = {"id": "n%02d" % i, "hostname": "h%02d" % i, "gpus": 8, "gpu_memory_gib": 80,
                        "gpu_model": "H100-80GB", "topology": {"spine": spine, "leaf": leaf}}
                if node["id"] == SPARE:
                    node["spare"] = True
                nodes.append(node)
                i += 1
        self.node_count = len(nodes)
        with open(os.path.join(workdir, "inventory.json"), "w") as f:
            json.dump({"nodes": nodes}, f)
        tokens = os.path.join(workdir, "tokens.json")
        with open(tokens, "w") as f:
            json.dump({"tokens": [{"token": ADMIN, "role": "admin", "name": "ops"},
                                  {"token": VIEWER, "role": "viewer", "name": "wall"}]}, f)
        os.chmod(tokens, 0o600)
        self.log = open(os.path.join(workdir, "shepherdd.log"), "w")
        port_file = os.path.join(workdir, "port")
        self.proc = subprocess.Popen(
            [SHEPHERDD, "--listen", "127.0.0.1:0", "--db", os.path.join(workdir, "db.sqlite"),
             "--inventory", os.path.join(workdir, "inventory.json"), "--port-file", port_file,
             "--tokens-file", tokens, "--ui-dir", SOURCE_UI],
            stdout=self.log, stderr=subprocess.STDOUT)

        def port():
            if self.proc.poll() is not None:
                raise AssertionError("shepherdd exited %s" % self.proc.returncode)
            with open(port_file) as f:
                text = f.read().strip()
            return int(text) if text else None
        self.port = wait_for("the daemon's port file", port)
        wait_for("/readyz", lambda: self.request("GET", "/readyz")[0] == 200)

    def request(self, method, path, token=None, body=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        headers = {}
        if token:
            headers["Authorization"] = "Bearer " + token
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        res = conn.getresponse()
        payload = res.read()
        conn.close()
        return res.status, dict(res.getheaders()), payload

    def json(self, method, path, token=ADMIN, body=None, expect=(200, 201, 202)):
        status, _, payload = self.request(method, path, token, body)
        if status not in expect:
            raise AssertionError("%s %s -> %d %s" % (method, path, status, payload[:500]))
        return json.loads(payload) if payload else None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Browser:
    """A minimal W3C WebDriver client over chromedriver."""

    def __init__(self, workdir):
        self.port = free_port()
        self.log = open(os.path.join(workdir, "chromedriver.log"), "w")
        self.proc = subprocess.Popen([CHROMEDRIVER, "--port=%d" % self.port], stdout=self.log,
                                     stderr=subprocess.STDOUT)
        wait_for("chromedriver", lambda: self.call("GET", "/status")["value"]["ready"])
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1400,1100", "--user-data-dir=" + os.path.join(workdir, "profile")]}}}}
        self.session = self.call("POST", "/session", caps, timeout=120)["value"]["sessionId"]

    def call(self, method, path, body=None, timeout=60):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as res:
                return json.loads(res.read())
        except urllib.error.HTTPError as e:
            raise AssertionError("webdriver %s %s -> %d %s" % (method, path, e.code, e.read()[:500]))

    def s(self, method, path, body=None):
        return self.call(method, "/session/%s%s" % (self.session, path), body)

    def go(self, url):
        self.s("POST", "/url", {"url": url})

    def js(self, script, *args):
        return self.s("POST", "/execute/sync", {"script": script, "args": list(args)})["value"]

    def text(self, css):
        return self.js("const e = document.querySelector(arguments[0]); return e ? e.textContent : null;", css)

    def count(self, css):
        return self.js("return document.querySelectorAll(arguments[0]).length;", css)

    def element(self, css):
        return self.s("POST", "/element", {"using": "css selector", "value": css})["value"][ELEMENT]

    def click(self, css):
        self.s("POST", "/element/%s/click" % self.element(css), {})

    def type(self, css, text):
        self.s("POST", "/element/%s/value" % self.element(css), {"text": text})

    def console(self):
        """The browser log entries since the last call (chromedriver's log endpoint drains them)."""
        return self.s("POST", "/se/log", {"type": "browser"})["value"]

    def screenshot(self, name):
        os.makedirs(ARTIFACTS, exist_ok=True)
        path = os.path.join(ARTIFACTS, name)
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.s("GET", "/screenshot")["value"]))
        print("screenshot: " + path, flush=True)
        return path

    def quit(self):
        try:
            self.call("DELETE", "/session/" + self.session)
        except Exception:
            pass
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def have_browser():
    return os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)


class DashboardTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not SHEPHERDD:
            raise unittest.SkipTest("SHEPHERDD is not set (ctest sets it)")
        cls.tmp = tempfile.mkdtemp(prefix="shepherd-ui-test-")
        cls.daemon = Daemon(cls.tmp)
        d = cls.daemon
        d.json("PATCH", "/v1/nodes/" + CORDONED, body={"schedulable": False, "reason": CORDON_REASON})
        job = d.json("POST", "/v1/jobs", body={
            "name": "ui-demo",
            "model": {"parameters": 1e8, "layers": 4, "hidden": 512, "heads": 8, "seq_len": 512},
            "training": {"global_batch_size": 64},
            "parallelism": {"tp": 1, "pp": 1, "dp": RANKS},
            "resources": {"gpus": RANKS, "gpus_per_node": 8}})
        cls.job = job["id"]
        cls.rank_token = job["rank_token"]
        for step in range(1, STEPS + 1):
            cls.report_step(step)
        cls.browser = Browser(cls.tmp)
        cls.base = "http://127.0.0.1:%d" % d.port

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "browser", None):
            cls.browser.quit()
        if getattr(cls, "daemon", None):
            cls.daemon.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def report_step(cls, step, nan_rank=None):
        reports = [{"rank": r, "attempt": 1, "kind": "step", "step": step,
                    "loss": "nan" if r == nan_rank else 4.0 - 0.1 * step + 0.001 * r,
                    "step_time_s": 1.0 + 0.01 * step}
                   for r in range(RANKS)]
        cls.daemon.json("POST", "/v1/jobs/%s/reports" % cls.job, token=cls.rank_token, body={"reports": reports})

    @classmethod
    def heartbeat_all_but(cls, silent_rank):
        reports = [{"rank": r, "attempt": 1, "kind": "heartbeat", "step": STEPS}
                   for r in range(RANKS) if r != silent_rank]
        cls.daemon.json("POST", "/v1/jobs/%s/reports" % cls.job, token=cls.rank_token, body={"reports": reports})

    def login(self, token):
        b = self.browser
        b.go(self.base + "/ui/#/fleet")
        if not b.js("return !document.getElementById('token-form').classList.contains('hidden');"):
            b.click("#token-button")
        b.type("#token-input", token)
        b.click("#token-form button[type=submit]")
        wait_for("whoami", lambda: "(" in (b.text("#who") or ""))
        b.console()  # the 401s before the token was pasted are expected; from here on, none

    def assert_no_console_errors(self):
        # GET /v1/jobs/{id}/goodput answers 404 until a job has goodput (or on a daemon without the route):
        # the page shows "—" for it; the browser still logs the 404 as a failed load.
        severe = [e for e in self.browser.console() if e.get("level") == "SEVERE"
                  and not ("/goodput" in e.get("message", "") and " 404 " in e.get("message", ""))]
        self.assertEqual(severe, [], "console errors: %s" % severe)

    def test_0_a_ui_dir_without_the_files_stops_the_daemon_with_a_message(self):
        missing = os.path.join(self.tmp, "no-ui-here")
        r = subprocess.run([SHEPHERDD, "--listen", "127.0.0.1:0", "--db", os.path.join(self.tmp, "other.db"),
                            "--ui-dir", missing], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("no index.html", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    def test_1_static_files_over_http(self):
        d = self.daemon
        status, headers, body = d.request("GET", "/ui/")
        self.assertEqual(status, 200)
        self.assertTrue(headers["Content-Type"].startswith("text/html"))
        self.assertIn(b"app.js", body)
        status, headers, _ = d.request("GET", "/ui/app.js")
        self.assertEqual((status, headers["Content-Type"]), (200, "text/javascript; charset=utf-8"))
        self.assertEqual(headers["Cache-Control"], "no-cache")
        self.assertEqual(d.request("GET", "/ui/style.css")[1]["Content-Type"], "text/css; charset=utf-8")
        status, headers, _ = d.request("GET", "/ui")
        self.assertEqual((status, headers.get("Location")), (308, "/ui/"))
        # Path traversal, encoded or not, never reaches a file outside ui/.
        for path in ["/ui/..%2f..%2fdaemon%2fmain.cpp", "/ui/%2e%2e", "/ui/../daemon/main.cpp",
                     "/ui/..%2F..%2F..%2F..%2Fetc%2Fpasswd", "/ui/.%2e/CMakeLists.txt", "/ui/CMakeLists.txt"]:
            status, _, body = d.request("GET", path)
            self.assertIn(status, (401, 404), path)
            self.assertNotIn(b"namespace", body, path)
            self.assertNotIn(b"root:", body, path)

    def test_2_admin_sees_fleet_jobs_job_failures_and_a_fault(self):
        b = self.browser
        b.go(self.base + "/ui/")
        # No token yet: the page asks for one and says why, never a blank page.
        wait_for("the token form", lambda: b.js(
            "return !document.getElementById('token-form').classList.contains('hidden');"))
        self.assertIn("401", b.text("#error") or "")
        self.login(ADMIN)

        # Fleet: counts from this test's setup.
        n = self.daemon.node_count
        expected = {"nodes": n, "allocated": JOB_NODES, "spare": 1, "cordoned": 1,
                    "available": n - JOB_NODES - 2, "failed": 0}
        wait_for("fleet counts", lambda: all(
            b.text('#main [data-count="%s"]' % k) == str(v) for k, v in expected.items()))
        self.assertEqual(b.count("#main .node"), n)
        self.assertEqual(b.count("#main .spine"), len({s for s, _ in LEAVES}))
        self.assertEqual(b.count("#main .leaf"), len(LEAVES))
        self.assertEqual(b.count('#main .node[data-state="allocated"]'), JOB_NODES)
        self.assertEqual(b.js("return document.querySelector('[data-node=\"%s\"]').dataset.state;" % SPARE), "spare")
        b.click('#main .node[data-node="%s"]' % CORDONED)
        wait_for("node detail", lambda: b.text('#node-detail [data-detail-node]') == CORDONED)
        self.assertEqual(b.text('#node-detail [data-field="state"]'), "cordoned")
        self.assertIn(CORDON_REASON, b.text("#node-detail"))
        self.assertGreater(b.count('#node-detail button[data-action="uncordon"]'), 0, "an admin may uncordon")
        b.screenshot("dashboard-fleet.png")

        # Jobs.
        b.go(self.base + "/ui/#/jobs")
        row = '#main tr[data-job="%s"]' % self.job
        wait_for("the job's row", lambda: b.count("#main table th") > 0 and b.text(row + ' [data-field="step"]') == str(STEPS))
        self.assertEqual(b.text('#main [data-count="jobs"]'), "1")
        self.assertEqual(b.text(row + ' [data-field="state"]'), "running")
        self.assertEqual(b.text(row + ' [data-field="attempt"]'), "1")
        # ETTR from GET /v1/jobs/{id}/goodput: a running job that has trained shows a share, not a dash.
        wait_for("the job's ETTR", lambda: re.fullmatch(r"\d+\.\d%", b.text(row + ' [data-field="ettr"]') or ""))

        # The job, then a fault injected while the page is open appears on its timeline.
        b.go(self.base + "/ui/#/job/" + self.job)
        wait_for("the job page", lambda: b.count('#main [data-field="why-restart"]') == 1
                 and b.text('#main [data-field="step"]') == str(STEPS))
        self.assertEqual(b.count("#main .rank"), RANKS)
        # Goodput: the ETTR, every bucket the API answers as a row, and the bar drawn from them.
        goodput = self.daemon.json("GET", "/v1/jobs/%s/goodput" % self.job)
        wait_for("the goodput card", lambda: b.count("#main tr[data-bucket]") == len(goodput["buckets"]))
        self.assertRegex(b.text('#main [data-field="goodput-ettr"]'), r"^\d+\.\d%$")
        self.assertEqual(b.count('#main tr[data-bucket="productive"]'), 1)
        self.assertGreater(b.count("#main .bucketbar span"), 0)
        # Charts from GET /v1/jobs/{id}/steps: a step is final once a later one is reported, so the newest
        # of the STEPS posted is not charted yet.
        wait_for("the charts", lambda: b.count('#main [data-chart="loss"]') == 1)
        self.assertEqual(b.js("return document.querySelector('#main [data-chart=\"loss\"]').dataset.points;"),
                         str(STEPS - 1))
        self.assertEqual(b.js("return document.querySelector('#main [data-chart=\"stepTime\"]').dataset.points;"),
                         str(STEPS - 1))
        self.assertEqual(b.count('#main [data-finding-kind]'), 0)
        self.assertGreater(b.count('#main button[data-action="cancel"]'), 0, "an admin may cancel")
        self.report_step(STEPS + 1, nan_rank=3)
        wait_for("the NaN on the timeline",
                 lambda: b.count('#main svg [data-finding-kind="nonfinite_loss"]') == 1)
        wait_for("the findings count", lambda: b.text('#main [data-count="findings"]') == "1")
        # Lateness: every rank but LATE_RANK heartbeats (in the probe) until the grid, redrawn from a health
        # answer after those heartbeats, shows it late and no other rank late.
        def late_rank_shown():
            self.heartbeat_all_but(LATE_RANK)
            return b.js("const late = Array.from(document.querySelectorAll('#main .rank'))"
                        ".filter((e) => e.classList.contains('late') || e.classList.contains('lost'))"
                        ".map((e) => e.dataset.rank);"
                        "return late.length === 1 && late[0] === '%d';" % LATE_RANK)
        wait_for("only rank %d shown late" % LATE_RANK, late_rank_shown, every_s=0.5)
        self.assertGreater(float(b.js("return document.querySelector('#main .rank[data-rank=\"%d\"]')"
                                      ".dataset.lastSeenS;" % LATE_RANK)), 2.0)
        b.screenshot("dashboard-ranks-late.png")
        b.screenshot("dashboard-job.png")

        # Failures, filtered by kind; and by a kind that did not happen.
        b.go(self.base + "/ui/#/failures?kind=nonfinite_loss")
        wait_for("failures", lambda: b.count("#failure-filters") == 1
                 and b.text('#main [data-count="failures"]') == "1")
        self.assertEqual(b.text('#main tr[data-finding] [data-field="kind"]'), "nonfinite_loss")
        b.go(self.base + "/ui/#/failures?kind=hang")
        wait_for("no hang", lambda: b.text('#main [data-count="failures"]') == "0")
        b.screenshot("dashboard-failures.png")
        self.assert_no_console_errors()

        # An API error is a message on the page, not a blank page.
        b.go(self.base + "/ui/#/job/no-such-job")
        wait_for("the error message", lambda: "404" in (b.text("#error") or ""))
        b.console()

    def test_3_a_viewer_sees_no_write_buttons(self):
        b = self.browser
        b.js("sessionStorage.clear();")
        self.login(VIEWER)
        self.assertEqual(b.text("#who"), "wall (viewer)")
        b.go(self.base + "/ui/#/job/" + self.job)
        wait_for("the job page", lambda: b.count('#main [data-field="why-restart"]') == 1
                 and b.text('#main [data-field="state"]') == "running")
        self.assertEqual(b.count("#main button[data-action]"), 0)
        b.go(self.base + "/ui/#/fleet")
        wait_for("the fleet", lambda: b.count("#main .node") == self.daemon.node_count)
        b.click('#main .node[data-node="%s"]' % CORDONED)
        wait_for("node detail", lambda: b.text('#node-detail [data-detail-node]') == CORDONED)
        self.assertEqual(b.count("#main button[data-action]"), 0)
        self.assert_no_console_errors()


if __name__ == "__main__":
    if not have_browser():
        print("SKIPPED: the browser tests need Debian's chromium and chromium-driver "
              "(sudo apt-get install chromium chromium-driver; scripts/dev.sh deps installs them)")
        sys.exit(77)
    unittest.main(verbosity=2)
