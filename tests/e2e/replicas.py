"""Replicated control planes for end-to-end tests and benchmarks: a 3-member etcd cluster on free loopback
ports in a temporary directory, and N real `shepherdd` replicas over it (port 0, port files). Standard
library only. Every wait is bounded by a deadline; nothing sleeps for correctness (polling only).

Clients here follow leadership as Shepherd's clients do: try each replica, follow a 307 to the leader with
the same method and body, retry on 503 and on a refused or reset connection until a deadline.
"""
import base64
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse

SHEPHERDD = os.environ.get("SHEPHERDD", os.path.join(os.path.dirname(__file__), "../../build/daemon/shepherdd"))
ETCD = os.environ.get("ETCD", "/usr/bin/etcd")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(fn, timeout, what, interval=0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(interval)


def request(url, method, path, body=None, timeout=5.0, token=None):
    """One HTTP call (with a bearer `token` when given): (status, headers dict lower-case, parsed JSON or
    text) or raises OSError."""
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if token:
            headers["Authorization"] = "Bearer " + token
        conn.request(method, path, body=data, headers=headers)
        r = conn.getresponse()
        payload = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        try:
            out = json.loads(payload) if payload else None
        except ValueError:
            out = payload.decode(errors="replace")
        return r.status, hdrs, out
    finally:
        conn.close()


def metric(text, name):
    """The value of the Prometheus sample `name` (labels included) in `text`, or None."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


class EtcdCluster:
    """Three etcd members, started and stopped by the test (never ports 2379/2380)."""

    def __init__(self, members=3):
        self.dir = tempfile.mkdtemp(prefix="shepherd-etcd-")
        self.names = ["m%d" % i for i in range(members)]
        self.client_ports = [free_port() for _ in self.names]
        self.peer_ports = [free_port() for _ in self.names]
        self.procs = {}
        self.logs = {}
        cluster = ",".join("%s=http://127.0.0.1:%d" % (n, p) for n, p in zip(self.names, self.peer_ports))
        for i, name in enumerate(self.names):
            self.logs[name] = open(os.path.join(self.dir, name + ".log"), "w")
            self.procs[name] = subprocess.Popen(
                [ETCD, "--name", name, "--data-dir", os.path.join(self.dir, name),
                 "--listen-client-urls", "http://127.0.0.1:%d" % self.client_ports[i],
                 "--advertise-client-urls", "http://127.0.0.1:%d" % self.client_ports[i],
                 "--listen-peer-urls", "http://127.0.0.1:%d" % self.peer_ports[i],
                 "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % self.peer_ports[i],
                 "--initial-cluster", cluster, "--initial-cluster-state", "new",
                 "--initial-cluster-token", os.path.basename(self.dir)],
                stdout=self.logs[name], stderr=subprocess.STDOUT)
        try:
            wait_for(self.healthy, 60, "etcd to elect a leader")
        except BaseException:
            self.close()
            raise

    @property
    def endpoints(self):
        return ["127.0.0.1:%d" % p for p in self.client_ports]

    def store_flag(self):
        return "etcd://" + ",".join(self.endpoints)

    def _gateway(self, path, body, index=None):
        for i, port in enumerate(self.client_ports):
            if index is not None and i != index:
                continue
            try:
                status, _, out = request("http://127.0.0.1:%d" % port, "POST", path, body, timeout=3)
                if status == 200:
                    return out
            except OSError:
                pass
        return None

    def healthy(self):
        out = self._gateway("/v3/kv/range", {"key": base64.b64encode(b"/health-probe").decode()})
        return out is not None

    def range_prefix(self, prefix):
        """[(key, value bytes, create_revision, mod_revision)] under `prefix`, and the store's revision."""
        key = prefix.encode()
        end = key[:-1] + bytes([key[-1] + 1])
        out = self._gateway("/v3/kv/range", {"key": base64.b64encode(key).decode(),
                                             "range_end": base64.b64encode(end).decode()})
        assert out is not None, "etcd does not answer"
        kvs = [(base64.b64decode(kv["key"]).decode(), base64.b64decode(kv.get("value", "")),
                int(kv.get("create_revision", 0)), int(kv.get("mod_revision", 0))) for kv in out.get("kvs", [])]
        return kvs, int(out["header"]["revision"])

    def pause(self, index):
        self.procs[self.names[index]].send_signal(signal.SIGSTOP)

    def resume(self, index):
        self.procs[self.names[index]].send_signal(signal.SIGCONT)

    def close(self):
        for p in self.procs.values():
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    p.send_signal(sig)
                except ProcessLookupError:
                    pass
            p.wait(timeout=20)
        for f in self.logs.values():
            f.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Replicas:
    """N shepherdd replicas over `etcd` under one prefix."""

    def __init__(self, etcd, n=3, prefix="/shepherd-e2e", config=None, ttl_s=2, args=None):
        self.etcd = etcd
        self.args = args or {}  # replica index -> extra command-line arguments
        self.prefix = prefix
        self.dir = tempfile.mkdtemp(prefix="shepherd-replicas-")
        cfg = {"tick_interval_s": 0.2, "node_heartbeat_timeout_s": 3, "agent_lease_s": 120, "stop_timeout_s": 20,
               "shutdown_grace_s": 3, "leader_ttl_s": ttl_s, "job_policy": {"allowed_env": ["PYTHONPATH"]}}
        # Fixed ports, known before the replicas start: ranks get every replica's URL (client_urls).
        self.ports = [free_port() for _ in range(n)]
        cfg["client_urls"] = ",".join("http://127.0.0.1:%d" % p for p in self.ports)
        cfg.update(config or {})
        with open(self.path("config.json"), "w") as f:
            json.dump(cfg, f)
        self.procs = [None] * n
        self.logs = [None] * n
        self.agents = {}  # node id -> Popen
        try:
            for i in range(n):
                self.start(i)
        except BaseException:
            self.close()
            raise

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def start(self, i):
        """Starts replica i (again on its earlier port, when it had one) and waits for its port file."""
        port_file = self.path("port-%d" % i)
        if os.path.exists(port_file):
            os.unlink(port_file)
        self.logs[i] = open(self.path("replica-%d.log" % i), "a")
        self.procs[i] = subprocess.Popen(
            [SHEPHERDD, "--listen", "127.0.0.1:%d" % self.ports[i], "--store", self.etcd.store_flag(),
             "--store-prefix", self.prefix, "--replica-id", "r%d" % i,
             "--port-file", port_file, "--config", self.path("config.json")] + self.args.get(i, []),
            stdout=self.logs[i], stderr=subprocess.STDOUT)

        def port():
            try:
                with open(port_file) as f:
                    return int(f.read().strip() or 0)
            except (FileNotFoundError, ValueError):
                assert self.procs[i].poll() is None, "replica %d exited: %s" % (i, self.log(i))
                return 0
        self.ports[i] = wait_for(port, 30, "replica %d's port file" % i)

    def log(self, i):
        with open(self.path("replica-%d.log" % i)) as f:
            return f.read()

    def url(self, i):
        return "http://127.0.0.1:%d" % self.ports[i]

    @property
    def urls(self):
        return [self.url(i) for i in range(len(self.procs))]

    def alive(self, i):
        return self.procs[i] is not None and self.procs[i].poll() is None

    def readyz(self, i):
        try:
            return request(self.url(i), "GET", "/readyz", timeout=2)
        except OSError:
            return None

    def leader(self):
        """The index of the one replica whose /readyz says it leads, or None."""
        leaders = [i for i in range(len(self.procs)) if self.alive(i)
                   and (lambda r: r is not None and r[0] == 200 and r[2].get("role") == "leader")(self.readyz(i))]
        assert len(leaders) <= 1, "two replicas say they lead: %s" % leaders
        return leaders[0] if leaders else None

    def wait_leader(self, timeout=30):
        return wait_for(lambda: (lambda l: (l,) if l is not None else None)(self.leader()), timeout,
                        "a leader")[0]

    def call(self, method, path, body=None, timeout=20, first=0):
        """Follows leadership: each replica in turn from `first`, 307s followed with the same method and body,
        503 and connection failures retried until `timeout`. (status, body) of the first other answer."""
        deadline = time.monotonic() + timeout
        i = first
        while True:
            url = self.url(i % len(self.procs))
            try:
                for _ in range(3):
                    status, hdrs, out = request(url, method, path, body)
                    if status != 307:
                        break
                    loc = urllib.parse.urlsplit(hdrs["location"])
                    url = "%s://%s" % (loc.scheme, loc.netloc)
                    path = loc.path + ("?" + loc.query if loc.query else "")
                if status not in (307, 503):
                    return status, out
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("%s %s: no replica answered within %.0f s" % (method, path, timeout))
            i += 1
            time.sleep(0.05)

    # ---- agents (`shepherdd agent --server URL1,URL2,URL3`) and their ranks
    def start_agent(self, node, gpus=2, topology="spine=s0,leaf=l0", spare=False, servers=None):
        args = [SHEPHERDD, "agent", "--server", ",".join(servers or self.urls), "--node-id", node, "--gpus", str(gpus),
                "--topology", topology, "--hostname", "127.0.0.1", "--state-dir", self.path("agent-" + node),
                "--heartbeat-interval", "0.5", "--stop-grace", "3", "--long-poll-wait", "5"]
        if spare:
            args.append("--spare")
        if os.geteuid() == 0:
            args.append("--allow-root-ranks")  # agents refuse root ranks otherwise (docs/security.md)
        with open(self.path("agent-%s.log" % node), "a") as log:
            self.agents[node] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        wait_for(lambda: (lambda a: a[0] == 200 and a[1].get("agent_attached"))(
            self.call("GET", "/v1/nodes/" + node)), 30, "agent of %s attached" % node)

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

    def stop_agents(self):
        for node, p in self.agents.items():
            for pid in self.rank_processes(node).values():
                for sig in (signal.SIGCONT, signal.SIGKILL):
                    try:
                        os.killpg(pid, sig)
                    except ProcessLookupError:
                        pass
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

    def kill(self, i, sig=signal.SIGKILL):
        self.procs[i].send_signal(sig)
        if sig == signal.SIGKILL:
            self.procs[i].wait(timeout=20)

    def close(self):
        self.stop_agents()
        for i, p in enumerate(self.procs):
            if p is None or p.poll() is not None:
                continue
            p.send_signal(signal.SIGCONT)
            p.send_signal(signal.SIGTERM)
        for p in self.procs:
            if p is None:
                continue
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in self.logs:
            if f:
                f.close()
