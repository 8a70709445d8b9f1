"""A real Shepherd cluster on one machine for end-to-end tests: the shepherdd daemon on port 0 and one
`shepherdd agent` process per simulated node, each with its own state dir. Standard library only.

Every wait is bounded by a deadline; nothing sleeps for correctness (polling intervals only).
"""
import json
import os
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

SHEPHERDD = os.environ.get("SHEPHERDD", os.path.join(os.path.dirname(__file__), "../../build/daemon/shepherdd"))


class Cluster:
    def __init__(self, daemon_config=None):
        self.dir = tempfile.mkdtemp(prefix="shepherd-e2e-")
        self.agents = {}  # node id -> Popen
        # agent_lease_s: a lost node's replacements start once its lease expired (docs/agent-protocol.md).
        # job_policy: the jobs put clients/python on PYTHONPATH for the zero-code wrapper, which the default
        # policy refuses (docs/security.md, "What a job may run").
        config = {"tick_interval_s": 0.2, "node_heartbeat_timeout_s": 2, "agent_lease_s": 8, "stop_timeout_s": 20,
                  "shutdown_grace_s": 3, "job_policy": {"allowed_env": ["PYTHONPATH"]}}
        config.update(daemon_config or {})
        with open(self.path("config.json"), "w") as f:
            json.dump(config, f)
        self.daemon_log = open(self.path("daemon.log"), "w")
        self.daemon = None
        self._start_daemon(0)
        self.url = "http://127.0.0.1:%d" % self.port

    def _start_daemon(self, port):
        if os.path.exists(self.path("port")):
            os.remove(self.path("port"))
        self.daemon = subprocess.Popen(
            [SHEPHERDD, "--listen", "127.0.0.1:%d" % port, "--db", self.path("shepherd.db"), "--port-file",
             self.path("port"), "--config", self.path("config.json")],
            stdout=self.daemon_log, stderr=subprocess.STDOUT)
        self.port = int(self.wait_for(lambda: self._read_port(), 20, "the daemon's port file"))

    def stop_daemon(self, sig=signal.SIGTERM):
        """Stops the daemon with `sig` (SIGTERM: a clean stop; SIGKILL: a crash) and waits for it to exit.
        Agents and ranks are left as they are. Returns its exit code."""
        self.daemon.send_signal(sig)
        return self.daemon.wait(timeout=30)

    def start_daemon_again(self):
        """Starts the daemon again on the same database and port (the agents' --server), and waits until it
        answers /readyz."""
        assert self.daemon.poll() is not None, "the daemon still runs"
        self._start_daemon(self.port)

        def ready():
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=5) as r:
                    return r.status == 200
            except (urllib.error.URLError, OSError):
                return False
        self.wait_for(ready, 30, "the restarted daemon to be ready")

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def _read_port(self):
        try:
            with open(self.path("port")) as f:
                return f.read().strip() or None
        except FileNotFoundError:
            assert self.daemon.poll() is None, "shepherdd exited: " + open(self.path("daemon.log")).read()
            return None

    # ---- HTTP
    def api(self, method, path, body=None, expect=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                status, payload = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, payload = e.code, e.read()
        out = json.loads(payload) if payload else None
        if expect is not None:
            assert status == expect, "%s %s -> %d %s" % (method, path, status, out)
        return out

    # ---- agents
    def start_agent(self, node, gpus=2, topology="spine=s0,leaf=l0", spare=False, heartbeat_interval=0.5):
        args = [SHEPHERDD, "agent", "--server", self.url, "--node-id", node, "--gpus", str(gpus), "--topology",
                topology, "--hostname", "127.0.0.1", "--state-dir", self.path("agent-" + node),
                "--heartbeat-interval", str(heartbeat_interval), "--stop-grace", "3", "--long-poll-wait", "5"]
        if spare:
            args.append("--spare")
        if os.geteuid() == 0:
            args.append("--allow-root-ranks")  # agents refuse root ranks otherwise (docs/security.md)
        with open(self.path("agent-%s.log" % node), "a") as log:
            self.agents[node] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        self.wait_for(lambda: (self.api("GET", "/v1/nodes/" + node) or {}).get("agent_attached"), 20,
                      "agent of %s attached" % node)

    def rank_processes(self, node):
        """{rank: pid} of the running rank processes the agent of `node` supervises."""
        try:
            with open(self.path("agent-" + node, "processes.json")) as f:
                procs = json.load(f)["processes"]
        except (FileNotFoundError, ValueError):
            return {}
        return {p["rank"]: p["pid"] for p in procs if p.get("state", "running") == "running"}

    def kill_node(self, node):
        """SIGKILL a node's agent and every rank process it runs (a node that dies)."""
        ranks = self.rank_processes(node)
        self.agents[node].kill()
        self.agents[node].wait()
        for pid in ranks.values():
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return ranks

    def rank_log(self, node, job, attempt, rank):
        try:
            with open(self.path("agent-" + node, "logs", "%s-a%d-r%d.log" % (job, attempt, rank))) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    # ---- waiting
    @staticmethod
    def wait_for(fn, timeout, what, interval=0.1):
        deadline = time.monotonic() + timeout
        while True:
            value = fn()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))
            time.sleep(interval)

    def close(self):
        daemon_up = self.daemon.poll() is None  # a test may have stopped it and failed before starting it again
        for job in (self.api("GET", "/v1/jobs") or {"jobs": []})["jobs"] if daemon_up else []:
            if job["state"] in ("launching", "running", "recovering", "queued"):
                self.api("POST", "/v1/jobs/%s/cancel" % job["id"])
        # Agents stop cancelled ranks; give them a bounded moment, then make sure nothing survives.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(self.rank_processes(n) for n, p in self.agents.items()
                                                  if p.poll() is None):
            time.sleep(0.2)
        for node, p in self.agents.items():
            for pid in self.rank_processes(node).values():
                for sig in (signal.SIGCONT, signal.SIGKILL):
                    try:
                        os.killpg(pid, sig)
                    except ProcessLookupError:
                        pass
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)  # a test may have stopped it
                p.terminate()
                p.wait(timeout=10)
            # Its fence keeper exits once the lease file goes, rather than at the lease's end (75 s by default).
            try:
                os.remove(self.path("agent-" + node, "lease"))
            except FileNotFoundError:
                pass
        if not daemon_up:
            self.daemon_log.close()
            return 0
        self.daemon.send_signal(signal.SIGTERM)
        code = self.daemon.wait(timeout=20)
        self.daemon_log.close()
        return code
