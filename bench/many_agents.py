#!/usr/bin/env python3
"""Many agents behind one address: the real shepherdd against ~1,100 simulated node agents on 127.0.0.1.

Each simulated agent speaks the agent protocol (docs/agent-protocol.md) as agent/agent.cpp does, over real
HTTP/1.1 keep-alive connections: it registers its node (8 GPUs), then holds two connections, like the real
agent's two threads: one long-polling `GET /v1/nodes/{id}/assignments?version=V&wait=30&keep=1`, one
heartbeating `POST /v1/nodes/{id}/heartbeat` every --interval seconds, listing the ranks its assignments
name as running. A failed call is retried on a new connection after the answer's Retry-After (jittered,
as net::RetryDelay) or the agent's own backoff (250 ms doubling for polls and registration, the next
interval for heartbeats). Once the nodes have registered (or --register-wait passed), one job is placed on
those that did (8 ranks per node; its ranks never report, and its startup_grace_s is long, so only node liveness is
judged), and the fleet runs for --seconds.

Printed (one JSON object on stdout, details on stderr): connections refused or reset and answers by status
as the agents saw them, heartbeats answered / late (no 200 for longer than the node timeout), nodes the
daemon declared lost (its log's "node lost" lines), the job's attempt and state at the end, the daemon's
`shepherd_requests_shed_total` when it exports it, and its RSS.

Standard library only, loopback only, bounded; it stops by itself and kills the daemon it started.
Usage: bench/many_agents.py [--shepherdd build/daemon/shepherdd] [--agents 1100] [--seconds 40]
                            [--auth] [--config-json '{"max_connections_per_address": 512}']
Also a module: tests/e2e/test_many_agents_e2e.py calls fleet() and reuses its client.
"""
import argparse
import asyncio
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ADMIN = "bench-admin-token-0123456789abcdef"


def agent_token(i):
    return "bench-agent-%05d-token-0123456789" % i


class Totals:
    def __init__(self):
        self.status = {}          # answer status -> count (0: no answer: refused, reset, timed out)
        self.heartbeats_ok = 0
        self.connects = 0
        self.connect_errors = 0   # connect() refused or reset before an answer
        self.worst_gap = 0.0      # longest time one agent went without a 200 heartbeat (after its first)
        self.late = 0             # heartbeat gaps longer than the node timeout
        self.stop = False

    def count(self, status):
        self.status[status] = self.status.get(status, 0) + 1


class Conn:
    """One keep-alive HTTP/1.1 connection; reconnects on the next call after a failure."""

    def __init__(self, port, token, totals):
        self.port, self.token, self.totals = port, token, totals
        self.reader = self.writer = None

    async def close(self):
        if self.writer:
            self.writer.close()
            try:
                await asyncio.wait_for(self.writer.wait_closed(), 2)
            except (OSError, ConnectionError, asyncio.TimeoutError):
                pass
        self.reader = self.writer = None

    async def call(self, method, path, body=None, timeout=60.0):
        """(status, headers, body bytes); status 0 when no answer came."""
        for attempt in range(2):
            fresh = self.writer is None
            try:
                if fresh:
                    self.totals.connects += 1
                    self.reader, self.writer = await asyncio.wait_for(
                        asyncio.open_connection("127.0.0.1", self.port), timeout)
                data = json.dumps(body).encode() if body is not None else b""
                head = "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n" % (method, path, len(data))
                if data:
                    head += "Content-Type: application/json\r\n"
                if self.token:
                    head += "Authorization: Bearer %s\r\n" % self.token
                self.writer.write(head.encode() + b"\r\n" + data)
                await self.writer.drain()
                return await asyncio.wait_for(self._read(), timeout)
            except (OSError, ConnectionError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError):
                await self.close()
                if fresh or attempt == 1:  # a stale keep-alive connection is retried once, as the agent does
                    if fresh:
                        self.totals.connect_errors += 1
                    return 0, {}, b""
        return 0, {}, b""

    async def _read(self):
        line = await self.reader.readuntil(b"\r\n")
        status = int(line.split()[1])
        headers = {}
        while True:
            line = await self.reader.readuntil(b"\r\n")
            if line == b"\r\n":
                break
            k, _, v = line.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        body = await self.reader.readexactly(int(headers.get("content-length", "0")))
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return status, headers, body


def retry_delay(headers, fallback):
    try:
        return float(headers["retry-after"]) * (1 + 0.5 * random.random())
    except (KeyError, ValueError):
        return fallback


class Agent:
    def __init__(self, i, port, auth, interval, node_timeout, totals):
        self.node = "n%05d" % i
        token = agent_token(i) if auth else None
        self.hb = Conn(port, token, totals)
        self.poll = Conn(port, token, totals)
        self.interval, self.node_timeout, self.totals = interval, node_timeout, totals
        self.i = i
        self.ranks = []
        self.registered = asyncio.Event()
        self.last_ok = None

    async def register(self):
        body = {"id": self.node, "hostname": "h-" + self.node, "gpus": 8,
                "topology": {"spine": "s%d" % (self.i // 256), "leaf": "l%d" % (self.i // 16)}}
        backoff = 0.25  # as the agent: 250 ms doubling to 10 s, or the answer's Retry-After
        while not self.totals.stop:
            status, headers, raw = await self.hb.call("POST", "/v1/nodes", body)
            self.totals.count(status)
            if status in (200, 201):
                self.registered.set()
                return
            await asyncio.sleep(retry_delay(headers, backoff))
            backoff = min(backoff * 2, 10.0)

    async def heartbeats(self):
        await self.register()
        path = "/v1/nodes/%s/heartbeat" % self.node
        next_at = time.monotonic()
        while not self.totals.stop:
            body = {"agent": {"pid": 10000 + self.i, "started_at": "2026-11-29T00:00:00.000Z"},
                    "processes": [{"job": j, "attempt": a, "rank": r, "pid": 20000 + r, "state": "running"}
                                  for j, a, r in self.ranks]}
            status, headers, _ = await self.hb.call("POST", path, body, timeout=10)
            self.totals.count(status)
            now = time.monotonic()
            if status == 200:
                self.totals.heartbeats_ok += 1
                if self.last_ok is not None:
                    gap = now - self.last_ok
                    self.totals.worst_gap = max(self.totals.worst_gap, gap)
                    if gap > self.node_timeout:
                        self.totals.late += 1
                self.last_ok = now
                next_at += self.interval
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            else:  # as the agent: the next heartbeat at the next interval, or after Retry-After
                next_at = time.monotonic() + retry_delay(headers, self.interval)
                await asyncio.sleep(next_at - time.monotonic())

    async def long_poll(self):
        await self.registered.wait()
        version, have, backoff = 0, False, 0.25
        while not self.totals.stop:
            path = "/v1/nodes/%s/assignments?version=%d&wait=%d&keep=1" % (self.node, version, 30 if have else 0)
            status, headers, raw = await self.poll.call("GET", path, timeout=45)
            self.totals.count(status)
            if status == 200:
                doc = json.loads(raw)
                version, have = doc.get("version", 0), True
                self.ranks = [(r["job"], r["attempt"], r["rank"]) for r in doc.get("ranks", [])]
                backoff = 0.25
                continue
            await asyncio.sleep(max(backoff, retry_delay(headers, 0)))  # as the agent: 250 ms doubling to 5 s
            backoff = min(backoff * 2, 5.0)


async def admin(port, method, path, body=None, limit_s=30):
    """An operator's call, retried (bounded) while the daemon turns it away (no answer, 429, 503)."""
    deadline = time.monotonic() + limit_s
    while True:
        c = Conn(port, ADMIN, Totals())
        try:
            status, headers, raw = await c.call(method, path, body, timeout=30)
        finally:
            await c.close()
        if status not in (0, 429, 503) or time.monotonic() > deadline:
            return status, raw
        await asyncio.sleep(retry_delay(headers, 0.5))


def metric_values(text, name):
    out = {}
    for line in text.splitlines():
        if line.startswith(name):
            key, _, value = line.rpartition(" ")
            out[key[len(name):] or "total"] = float(value)
    return out


async def run(args, port, log_path):
    totals = Totals()
    agents = [Agent(i, port, args.auth, args.interval, args.node_timeout, totals) for i in range(args.agents)]
    tasks = []
    t0 = time.monotonic()
    for a in agents:  # all at once, as a fleet reconnecting after a daemon restart
        tasks.append(asyncio.ensure_future(a.heartbeats()))
        tasks.append(asyncio.ensure_future(a.long_poll()))
    deadline = time.monotonic() + args.register_wait
    while sum(a.registered.is_set() for a in agents) < len(agents) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    registered = sum(a.registered.is_set() for a in agents)
    print("# %d of %d agents registered in %.1f s" % (registered, len(agents), time.monotonic() - t0),
          file=sys.stderr, flush=True)
    placed_on = max(1, registered)  # the job fills the nodes that registered (all of them, when healthy)
    gpus = 8 * placed_on
    spec = {"name": "fleet", "command": ["/bin/true"],
            "model": {"parameters": 1e9, "layers": 16, "hidden": 2048, "heads": 16, "seq_len": 2048},
            "training": {"global_batch_size": gpus}, "parallelism": {"tp": 8, "pp": 1, "dp": placed_on},
            "resources": {"gpus": gpus, "gpus_per_node": 8},
            "policy": {"startup_grace_s": 3600, "max_restarts": 3}}
    status, raw = await admin(port, "POST", "/v1/jobs", spec)
    if status != 201:
        raise SystemExit("job refused: %d %s" % (status, raw[:300]))
    job = json.loads(raw)["id"]
    deadline = time.monotonic() + 30
    while sum(bool(a.ranks) for a in agents) < len(agents) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    placed = sum(bool(a.ranks) for a in agents)
    print("# job %s placed: %d agents hold its ranks after %.1f s" % (job, placed, time.monotonic() - t0),
          file=sys.stderr, flush=True)
    await asyncio.sleep(args.seconds)
    status, raw = await admin(port, "GET", "/v1/jobs/" + job, limit_s=10)
    doc = json.loads(raw) if status == 200 else {}
    status, metrics = await admin(port, "GET", "/metrics", limit_s=10)
    metrics = metrics if status == 200 else b""
    text = metrics.decode(errors="replace")
    totals.stop = True
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.gather(*(c.close() for a in agents for c in (a.hb, a.poll)))
    with open(log_path, errors="replace") as f:
        log = f.read()
    return {
        "agents": len(agents), "auth": args.auth, "registered": registered, "placed": placed,
        "seconds": args.seconds, "answers": {str(k): v for k, v in sorted(totals.status.items())},
        "connects": totals.connects, "connect_errors": totals.connect_errors,
        "heartbeats_ok": totals.heartbeats_ok, "heartbeat_gaps_over_node_timeout": totals.late,
        "worst_heartbeat_gap_s": round(totals.worst_gap, 2),
        "node_lost_log_lines": len(re.findall(r"node lost", log)),
        "job_attempt": doc.get("attempt"), "job_state": doc.get("state"),
        "rejected": metric_values(text, 'shepherd_http_requests_total{route="rejected"'),
        "shed": metric_values(text, "shepherd_requests_shed_total"),
        "open_files_warnings": len(re.findall(r"open-files limit", log)),
    }


class DaemonProcess:
    """shepherdd on 127.0.0.1:0 in a temporary directory, with `config` (and per-node tokens when `agents`
    is given); stop() terminates it (kill after 30 s)."""

    def __init__(self, shepherdd, config, agents=None):
        self.tmp = tempfile.mkdtemp(prefix="shepherd-many-agents-")
        cmd = [shepherdd, "--listen", "127.0.0.1:0", "--port-file", os.path.join(self.tmp, "port"),
               "--db", os.path.join(self.tmp, "shepherd.db"), "--config", os.path.join(self.tmp, "config.json")]
        if agents is not None:
            entries = [{"token": ADMIN, "role": "admin", "name": "ops"}]
            entries += [{"token": agent_token(i), "role": "agent", "node": "n%05d" % i} for i in range(agents)]
            with open(os.path.join(self.tmp, "tokens.json"), "w") as f:
                json.dump({"tokens": entries}, f)
            os.chmod(os.path.join(self.tmp, "tokens.json"), 0o600)
            cmd += ["--tokens-file", os.path.join(self.tmp, "tokens.json")]
        with open(os.path.join(self.tmp, "config.json"), "w") as f:
            json.dump(config, f)
        self.log_path = os.path.join(self.tmp, "daemon.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=self.log)
        port_file = os.path.join(self.tmp, "port")
        deadline = time.monotonic() + 30
        while not os.path.exists(port_file) and time.monotonic() < deadline and self.proc.poll() is None:
            time.sleep(0.05)
        if not os.path.exists(port_file):
            self.stop()
            raise RuntimeError("daemon did not start; log: " + self.log_path)
        time.sleep(0.05)  # the port file is renamed into place whole, but be kind to slow filesystems
        with open(port_file) as f:
            self.port = int(f.read())

    def peak_rss_mib(self):
        try:
            with open("/proc/%d/status" % self.proc.pid) as f:
                for line in f:
                    if line.startswith("VmHWM"):
                        return round(int(line.split()[1]) / 1024, 1)
        except OSError:
            pass
        return None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def raise_open_files(agents):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 2 * agents + 64
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, need), hard))


def fleet(shepherdd, agents=1100, seconds=40, auth=False, config=None, interval=1.0, node_timeout=10.0,
          register_wait=60, keep=True):
    """Runs the whole measurement; the result dict (see the module's docstring). keep=False: the daemon's
    directory (its log) is removed at the end."""
    args = argparse.Namespace(agents=agents, seconds=seconds, auth=auth, interval=interval,
                              node_timeout=node_timeout, register_wait=register_wait)
    raise_open_files(agents)
    cfg = {"node_heartbeat_timeout_s": node_timeout}
    cfg.update(config or {})
    daemon = DaemonProcess(shepherdd, cfg, agents if auth else None)
    try:
        result = asyncio.run(run(args, daemon.port, daemon.log_path))
        result["daemon_peak_rss_mib"] = daemon.peak_rss_mib()
        result["log"] = daemon.log_path if keep else None
        return result
    finally:
        daemon.stop()
        if not keep:
            shutil.rmtree(daemon.tmp, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shepherdd", default="build/daemon/shepherdd")
    p.add_argument("--agents", type=int, default=1100)
    p.add_argument("--seconds", type=float, default=40)
    p.add_argument("--interval", type=float, default=1.0, help="heartbeat interval (s)")
    p.add_argument("--node-timeout", type=float, default=10.0, help="the daemon's node_heartbeat_timeout_s")
    p.add_argument("--register-wait", type=float, default=60, help="longest wait for every agent (s)")
    p.add_argument("--auth", action="store_true", help="per-node agent tokens (else no tokens file)")
    p.add_argument("--config-json", default="{}", help="extra daemon configuration (JSON object)")
    args = p.parse_args()
    result = fleet(args.shepherdd, args.agents, args.seconds, args.auth, json.loads(args.config_json),
                   args.interval, args.node_timeout, args.register_wait)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
