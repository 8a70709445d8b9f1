#!/usr/bin/env python3
"""Hostile-load benchmark: the real shepherdd under one low-privilege client's attack at a time.

Starts the daemon on 127.0.0.1:0 (a tokens file with admin, viewer and agent tokens), registers two nodes
whose agents this script simulates (each heartbeats every second over real HTTP, as agent/protocol.* does,
listing the ranks the daemon assigned it as running), submits a two-rank job, and has its simulated ranks
report a step every second with the rank token the assignments carry. Each attack gets a daemon of its
own (so shepherd_control_hold_seconds_max, the longest control-thread hold since start, is that attack's):
it runs for --seconds while every heartbeat's latency is measured, and one table row is printed per attack:

  worst and p99 heartbeat latency, heartbeats refused (not 200), late (beyond the lease), whether a rank
  would have been fenced (an agent went a lease without a 200), reports refused, and
  shepherd_control_hold_seconds_max when the attack starts and when it ends (n/a when the daemon does not
  export it).

The flight-recorder attack runs while the job has a hang finding: its rank 0 sits in an all-reduce rank 1
never enters, past the job's hang_timeout_s (1 s), so a dump listed for the hung attempt is merged into it.

Standard library only, loopback only, bounded loops; it stops by itself and kills the daemon it started.
Usage: bench/hostile_load.py [--shepherdd build/daemon/shepherdd] [--seconds 8] [--attacks a,b,...]
"""
import argparse
import http.client
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ADMIN = "bench-admin-token-0123456789"
VIEWER = "bench-viewer-token-0123456789"
AGENTS = {"n0": "bench-agent-n0-token-0123456789", "n1": "bench-agent-n1-token-0123456789",
          "nx": "bench-agent-nx-token-0123456789"}  # nx: an unrelated node's agent (the attacker's)
JOB = {"name": "victim", "command": ["/bin/true"],
       "model": {"parameters": 1e8, "layers": 4, "hidden": 512, "heads": 8, "seq_len": 512},
       "training": {"global_batch_size": 32}, "parallelism": {"tp": 1, "pp": 1, "dp": 2},
       "resources": {"gpus": 2, "gpus_per_node": 1}}
# The hung job of the flight-recorder attack: a hang is judged after 1 s in a collective; no restart within
# the attack (the hang finding's attempt stays the job's).
HANG_POLICY = {"startup_grace_s": 0, "hang_timeout_s": 1, "restart_backoff_s": 600}


def request(port, method, path, token=None, body=None, timeout=60, limit=1 << 20):
    """One request on its own connection: (status, body bytes, seconds). Status 0: no answer."""
    start = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = "Bearer " + token
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        raw = resp.read(limit)
        return resp.status, raw, time.monotonic() - start
    except (OSError, http.client.HTTPException):
        return 0, b"", time.monotonic() - start
    finally:
        conn.close()


def metric(port, name):
    status, raw, _ = request(port, "GET", "/metrics", ADMIN, timeout=10)
    if status != 200:
        return None
    for line in raw.decode(errors="replace").splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            try:
                return float(line.rsplit(" ", 1)[1])
            except ValueError:
                return None
    return None


class Fleet:
    """The simulated agents of n0 and n1 and the job's simulated ranks."""

    def __init__(self, port, lease_s, hang=False):
        self.port, self.lease_s, self.hang = port, lease_s, hang
        self.since = time.time()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.ranks = {}  # node -> [(job, attempt, rank, token)]
        self.stepped = set()
        self.reset()

    def reset(self):
        with self.lock:
            self.latencies, self.refused, self.late = [], 0, 0
            self.reports_refused, self.reports = 0, 0
            now = time.monotonic()
            self.last_ok = {node: now for node in ("n0", "n1")}
            self.last_started_done = {node: 0.0 for node in ("n0", "n1")}  # start of the last answered one
            self.worst_gap = 0.0

    def agent(self, node):
        """Heartbeats every second, as the agent's heartbeat thread does (never behind the long poll)."""
        token = AGENTS[node]
        while not self.stop.is_set():
            tick = time.monotonic()
            procs = [{"job": j, "attempt": a, "rank": r, "pid": 1000 + r, "state": "running"}
                     for j, a, r, _ in self.ranks.get(node, [])]
            body = {"agent": {"pid": 4242, "started_at": "2026-11-29T00:00:00.000Z"}, "processes": procs}
            started = time.monotonic()
            status, _, took = request(self.port, "POST", "/v1/nodes/%s/heartbeat" % node, token, body,
                                      timeout=self.lease_s * 4)
            now = time.monotonic()
            with self.lock:
                self.last_started_done[node] = started
                self.latencies.append(took)
                if status != 200:
                    self.refused += 1
                if took > self.lease_s:
                    self.late += 1
                if status == 200:
                    self.worst_gap = max(self.worst_gap, now - self.last_ok[node])
                    self.last_ok[node] = now
            self.stop.wait(max(0.0, 1.0 - (time.monotonic() - tick)))

    def ranks_of(self, node):
        """Reads the node's assignments and has each of its ranks report a step, every second."""
        token = AGENTS[node]
        while not self.stop.is_set():
            tick = time.monotonic()
            status, raw, _ = request(self.port, "GET", "/v1/nodes/%s/assignments?version=-1&wait=0" % node,
                                     token, timeout=30)
            if status == 200:
                doc = json.loads(raw)
                self.ranks[node] = [(r["job"], r["attempt"], r["rank"], r.get("env", {}).get("SHEPHERD_TOKEN"))
                                    for r in doc.get("ranks", [])]
            for j, a, r, rank_token in self.ranks.get(node, []):
                report = {"reports": [{"rank": r, "attempt": a, "kind": "step", "step": int(tick),
                                       "loss": 2.0, "grad_norm": 1.0, "step_time_s": 1.0}]}
                if self.hang:  # step 1 once, then rank 0 waits in an all-reduce rank 1 never enters
                    beat = {"rank": r, "attempt": a, "kind": "heartbeat", "step": 1}
                    if r == 0:
                        beat["collective"] = {"seq": 5, "op": "all_reduce", "group": "dp", "since": self.since}
                    report = {"reports": ([{"rank": r, "attempt": a, "kind": "step", "step": 1}]
                                          if (j, a, r) not in self.stepped else []) + [beat]}
                    self.stepped.add((j, a, r))
                status, _, _ = request(self.port, "POST", "/v1/jobs/%s/reports" % j, rank_token, report, timeout=30)
                with self.lock:
                    self.reports += 1
                    self.reports_refused += status // 100 != 2
            self.stop.wait(max(0.0, 1.0 - (time.monotonic() - tick)))

    def settle(self, since, limit_s=120):
        """Waits (bounded) until every agent has finished a heartbeat begun after `since`, so that one held
        by the attack is counted with its latency."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            with self.lock:
                if all(t > since for t in self.last_started_done.values()):
                    return
            time.sleep(0.1)

    def summary(self):
        with self.lock:
            now = time.monotonic()
            gap = max([self.worst_gap] + [now - t for t in self.last_ok.values()])
            lat = sorted(self.latencies) or [0.0]
            p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
            return {"heartbeats": len(self.latencies), "worst_ms": lat[-1] * 1000, "p99_ms": p99 * 1000,
                    "refused": self.refused, "late": self.late, "fenced": gap > self.lease_s,
                    "worst_gap_s": gap, "reports": self.reports, "reports_refused": self.reports_refused}

    def a_rank(self):
        for ranks in self.ranks.values():
            for j, a, r, token in ranks:
                if token:
                    return j, a, r, token
        return None


# Attacks: each runs until `until` (a monotonic time) and returns a short note.

def attack_json_keys(port, fleet, until):
    """A flat JSON object of 100k keys (1.5 MB) as a rank's report body, repeatedly."""
    job, _, _, token = fleet.a_rank()
    body = ("{" + ",".join('"k%06d":0' % i for i in range(100000)) + "}").encode()
    n, statuses = 0, set()
    while time.monotonic() < until:
        status, _, _ = request(port, "POST", "/v1/jobs/%s/reports" % job, token, body, timeout=120)
        n += 1
        statuses.add(status)
    return "%d bodies, answers %s" % (n, sorted(statuses))


def _open(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.setblocking(False)
    return s


def attack_slow_bodies(port, fleet, until, token=VIEWER, path="/v1/plan", count=64):
    """`count` connections announce 4 MiB bodies and dribble 1 KiB per half second; reconnect when cut."""
    head = ("POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n" % (path, token, 4 << 20)).encode()
    conns, opened, cut = [None] * count, 0, 0
    while time.monotonic() < until:
        for i in range(count):
            if conns[i] is None:
                try:
                    conns[i] = _open(port)
                    conns[i].send(head)
                    opened += 1
                except OSError:
                    conns[i] = None
                    continue
            try:
                conns[i].send(b" " * 1024)
                conns[i].recv(4096)  # an answer (429/503) or EOF: refused or cut
                raise OSError("answered or closed")
            except BlockingIOError:
                pass
            except OSError:
                conns[i].close()
                conns[i] = None
                cut += 1
        time.sleep(0.5)
    for c in conns:
        if c:
            c.close()
    return "%d connections opened, %d cut or refused" % (opened, cut)


def attack_connection_flood(port, fleet, until, count=3000):
    """A rank token opens `count` keep-alive connections, each with one valid report, and holds them. They
    come from 127.0.0.2-51 (loopback aliases), so the per-address cap is not what stops them."""
    job, attempt, rank, token = fleet.a_rank()
    body = json.dumps({"reports": [{"rank": rank, "attempt": attempt, "kind": "heartbeat"}]}).encode()
    req = ("POST /v1/jobs/%s/reports HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
           "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (job, token, len(body))).encode() + body
    conns, failed = [], 0
    while time.monotonic() < until and len(conns) + failed < count:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.settimeout(2)
            s.bind(("127.0.0.%d" % (2 + len(conns) % 50), 0))
            s.connect(("127.0.0.1", port))
            s.sendall(req)
            conns.append(s)
        except OSError:
            s.close()
            failed += 1
    time.sleep(max(0.0, until - time.monotonic()))
    open_now = 0
    for s in conns:
        try:
            s.setblocking(False)
            data = s.recv(65536)
            while data and b"Connection: close" not in data:
                data = s.recv(65536)
        except BlockingIOError:
            open_now += 1  # answered, kept alive
        except OSError:
            pass
        s.close()
    return "%d opened, %d failed to open, %d still open at the end" % (len(conns), failed, open_now)


def flight_body(job, attempt, processes, dumps, pad):
    procs, size = [], 0
    while size < (4 << 20) - 16384 and len(procs) < processes:
        rank = len(procs)
        fr = [{"path": "/var/lib/shepherd/agent/flight-recorder/%s-a%d-r%d/%s/nccl_trace_rank_%d_%04d" %
               (job, attempt, rank % 2, "x" * pad, rank, k), "size": 81920} for k in range(dumps)]
        p = {"job": job, "attempt": attempt, "rank": rank % 2, "pid": 5000 + rank, "state": "running",
             "flight_recorder": fr}
        size += len(json.dumps(p))
        procs.append(p)
    return json.dumps({"processes": procs}).encode()


def attack_flight_recorder(port, fleet, until):
    """Agent nx (not where the job runs) heartbeats ~4 MiB of the hung attempt's processes with
    flight-recorder paths: 64 per process; where the daemon refuses that (422), the largest it accepts (256
    processes of 8 dumps with 1.9 KB paths)."""
    job, attempt = fleet.hung
    body = flight_body(job, attempt, 4096, 64, 0)
    n, statuses, shape = 0, set(), "64 dumps per process"
    while time.monotonic() < until:
        status, _, _ = request(port, "POST", "/v1/nodes/nx/heartbeat", AGENTS["nx"], body, timeout=300)
        n += 1
        statuses.add(status)
        if status == 422 and n == 1:
            body, shape = flight_body(job, attempt, 256, 8, 1900), "first 422, then 256 x 8 dumps"
    _, raw, _ = request(port, "GET", "/v1/failures?kind=hang&job=" + job, ADMIN, timeout=300, limit=1 << 30)
    found = json.loads(raw or b"{}").get("failures") or [{}]
    return "%d heartbeats of %.1f MiB (%s), answers %s; the hang finding lists %d dumps" % (
        n, len(body) / 1048576, shape, sorted(statuses), len(found[0].get("flight_recorder", [])))


def attack_forged_reports(port, fleet, until):
    """A rank's token reports param_hash steps 'from' every rank of its job, each with its own hash."""
    job, attempt, _, token = fleet.a_rank()
    n, statuses, step = 0, set(), 1
    while time.monotonic() < until:
        reports = [{"rank": r, "attempt": attempt, "kind": "param_hash", "step": step, "hash": "%08x" % (r + 1)}
                   for r in range(2)]
        status, _, _ = request(port, "POST", "/v1/jobs/%s/reports" % job, token, {"reports": reports})
        statuses.add(status)
        n += 1
        step += 1
        time.sleep(0.05)
    _, raw, _ = request(port, "GET", "/v1/failures?kind=sdc_suspected&job=" + job, ADMIN)
    sdc = len(json.loads(raw or b"{}").get("failures", []))
    _, raw, _ = request(port, "GET", "/v1/jobs/" + job, ADMIN)
    return "%d requests, answers %s; %d sdc_suspected findings, job at attempt %s" % (
        n, sorted(statuses), sdc, json.loads(raw or b"{}").get("attempt"))


def attack_planner(port, fleet, until):
    """A viewer keeps 16 'auto' planner searches of a large model in flight."""
    body = {"model": {"parameters": 4.05e11, "layers": 126, "hidden": 16384, "heads": 128, "seq_len": 8192},
            "training": {"global_batch_size": 2048}, "parallelism": "auto",
            "resources": {"gpus": 16384, "gpus_per_node": 8}}
    statuses, counts = set(), [0]
    lock = threading.Lock()

    def one():
        while time.monotonic() < until:
            status, _, _ = request(port, "POST", "/v1/plan", VIEWER, body, timeout=120)
            with lock:
                statuses.add(status)
                counts[0] += 1
            if status == 429:
                time.sleep(0.2)

    threads = [threading.Thread(target=one) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return "%d searches, answers %s" % (counts[0], sorted(statuses))


ATTACKS = [
    ("baseline (no attack)", "baseline", lambda port, fleet, until: time.sleep(max(0, until - time.monotonic())) or ""),
    ("100k-key JSON body (rank token)", "json", attack_json_keys),
    ("64 slow 4 MiB bodies (viewer)", "slow", attack_slow_bodies),
    ("3000 connections (rank token)", "flood", attack_connection_flood),
    ("4 MiB flight_recorder heartbeat (other node's agent)", "flight", attack_flight_recorder),
    ("forged reports for other ranks (rank token)", "forged", attack_forged_reports),
    ("16 planner searches (viewer)", "planner", attack_planner),
]


def start_daemon(shepherdd, tmp):
    tokens = os.path.join(tmp, "tokens.json")
    entries = [{"token": ADMIN, "role": "admin", "name": "ops"}, {"token": VIEWER, "role": "viewer", "name": "v"}]
    entries += [{"token": t, "role": "agent", "node": n} for n, t in AGENTS.items()]
    with open(tokens, "w") as f:
        json.dump({"tokens": entries}, f)
    os.chmod(tokens, 0o600)
    port_file = os.path.join(tmp, "port")
    log = open(os.path.join(tmp, "daemon.log"), "w")
    daemon = subprocess.Popen([shepherdd, "--listen", "127.0.0.1:0", "--port-file", port_file, "--db",
                               os.path.join(tmp, "shepherd.db"), "--tokens-file", tokens], stdout=log, stderr=log)
    deadline = time.monotonic() + 30
    while not os.path.exists(port_file) and time.monotonic() < deadline and daemon.poll() is None:
        time.sleep(0.05)
    return daemon, log, int(open(port_file).read())


def run_attack(args, title, key, fn):
    """A fresh daemon, nodes, the job and its simulated agents; the attack; SIGTERM. The table row."""
    tmp = tempfile.mkdtemp(prefix="shepherd-hostile-%s-" % key)
    daemon, log, port = start_daemon(args.shepherdd, tmp)
    fleet, agents = None, []
    try:
        for i, (node, token) in enumerate(AGENTS.items()):
            status, raw, _ = request(port, "POST", "/v1/nodes", token, {
                "id": node, "hostname": "h-" + node, "gpus": 1, "topology": {"spine": "s0", "leaf": "l%d" % i}})
            assert status in (200, 201), (status, raw)
        if os.environ.get("HOSTILE_NX_CORDON", "1") == "1":  # keep the job off the attacker's node
            request(port, "PATCH", "/v1/nodes/nx", ADMIN, {"schedulable": False})
        spec = dict(JOB, policy=HANG_POLICY) if key == "flight" else JOB
        status, raw, _ = request(port, "POST", "/v1/jobs", ADMIN, spec)
        assert status == 201, (status, raw)
        job = json.loads(raw)["id"]
        fleet = Fleet(port, args.lease_s, hang=key == "flight")
        agents = [threading.Thread(target=fn_, args=(n,), daemon=True)
                  for n in ("n0", "n1") for fn_ in (fleet.agent, fleet.ranks_of)]
        for t in agents:
            t.start()
        deadline = time.monotonic() + 30
        while fleet.a_rank() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert fleet.a_rank(), "the job's ranks were never assigned"
        if key == "flight":  # wait (bounded) for the hang finding
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                _, raw, _ = request(port, "GET", "/v1/failures?kind=hang&job=" + job, ADMIN)
                found = json.loads(raw or b"{}").get("failures", [])
                if found:
                    fleet.hung = (job, found[0]["attempt"])
                    break
                time.sleep(0.5)
            assert getattr(fleet, "hung", None), "no hang finding within 90 s"
        time.sleep(2)
        hold_before = metric(port, "shepherd_control_hold_seconds_max")
        fleet.reset()
        note = fn(port, fleet, time.monotonic() + args.seconds)
        fleet.settle(time.monotonic())
        s = fleet.summary()
        hold_after = metric(port, "shepherd_control_hold_seconds_max")
        print("# %s: %s" % (title, note), file=sys.stderr, flush=True)
        fleet.stop.set()
        for t in agents:
            t.join(timeout=40)
        start = time.monotonic()
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=60)
            term = "%.1f s" % (time.monotonic() - start)
        except subprocess.TimeoutExpired:
            term = "none in 60 s"
        return title, s, hold_before, hold_after, note, term
    finally:
        if fleet:
            fleet.stop.set()
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        log.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shepherdd", default=os.path.join(os.path.dirname(__file__), "..", "build", "daemon", "shepherdd"))
    ap.add_argument("--seconds", type=float, default=8, help="how long each attack runs")
    ap.add_argument("--attacks", default=",".join(a[1] for a in ATTACKS), help="comma-separated keys")
    ap.add_argument("--lease-s", type=float, default=15,
                    help="the lease heartbeats are judged against (stricter than the daemon's default, 75)")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    wanted = args.attacks.split(",")
    rows = [run_attack(args, title, key, fn) for title, key, fn in ATTACKS if key in wanted]
    fmt = lambda v: "n/a" if v is None else "%.4f" % v
    print("| attack | heartbeats | worst ms | p99 ms | refused | late | fenced | reports refused |"
          " control hold max s (start → end) | SIGTERM |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for title, s, hb, ha, _, term in rows:
        print("| %s | %d | %.0f | %.0f | %d | %d | %s | %d/%d | %s → %s | %s |" % (
            title, s["heartbeats"], s["worst_ms"], s["p99_ms"], s["refused"], s["late"],
            "YES (%.0f s without a 200)" % s["worst_gap_s"] if s["fenced"] else "no",
            s["reports_refused"], s["reports"], fmt(hb), fmt(ha), term))


if __name__ == "__main__":
    main()
