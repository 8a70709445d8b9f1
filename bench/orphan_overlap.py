#!/usr/bin/env python3
"""Silent-agent / orphan-overlap benchmark: the real shepherdd on loopback (port 0, a
temp-dir database), real `shepherdd agent` processes for four simulated 2-GPU nodes (n0, n1 and the spares
sp0, sp1) and a 4-rank job whose ranks are a small python3 loop, no torch: each writes a wall-clock timestamp
line every 0.1 s to <out>/<job>-a<attempt>-r<rank>-<pid>. One agent (n1's, which talks to the daemon
through a TCP proxy this script controls) goes silent for SILENCE seconds, longer than the node timeout and
the lease, in one of these ways:

  sigstop             SIGSTOP of the agent process only (its ranks keep running), SIGCONT after SILENCE
  partition-refuse    the proxy closes every connection and its listening socket (connection refused), the
                      agent keeps running; restored after SILENCE
  partition-blackhole the proxy keeps connections open but forwards nothing (calls time out); restored after

Per run it records, from the rank files and from polling /proc every 50 ms:
  old_last  when the last rank process of attempt 1 (any node) was last alive (its last line, or last seen
            in /proc, whichever is later), seconds after the silence began
  new_first when the first rank process of a later attempt started (/proc start time), same origin
  overlap   max(0, old_last - new_first): seconds an old rank ran beside its replacement (must be 0)
  resumed   when every rank of the new attempt was running (all four wrote a line)
  max_procs the most rank processes alive at once (4 = no orphan beside its replacement)
  findings  the kinds of GET /v1/failures raised

  python3 bench/orphan_overlap.py [--shepherdd build/daemon/shepherdd] [--reps 3] [--silence 20]
                                  [--scenarios sigstop,partition-refuse,partition-blackhole] [--keep]

Standard library only. Every wait is bounded by a deadline; sleeps are polling intervals only.
"""
import argparse
import json
import os
import select
import signal
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = ("sigstop", "partition-refuse", "partition-blackhole")
# Short timings so one run takes well under a minute: node lost 2 s after its last heartbeat, its ranks'
# replacements handed to a spare once its 5 s lease expired (docs/agent-protocol.md, "Lease").
DAEMON_CONFIG = {"tick_interval_s": 0.2, "node_heartbeat_timeout_s": 2, "agent_lease_s": 5, "stop_timeout_s": 20,
                 "shutdown_grace_s": 3}
RANK_CODE = r"""
import os, sys, time
name = "%s-a%s-r%s-%d" % (os.environ["SHEPHERD_JOB"], os.environ["SHEPHERD_ATTEMPT"], os.environ["RANK"], os.getpid())
with open(os.path.join(sys.argv[1], name), "a", buffering=1) as f:
    while True:
        f.write("%.3f\n" % time.time())
        time.sleep(0.1)
"""
CLK_TCK = os.sysconf("SC_CLK_TCK")


# Wall-clock time of boot, to the clock tick (/proc/stat's btime is whole seconds): stat(5)'s starttime
# counts from boot.
BOOT = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)


def proc_start(pid):
    """(state, wall-clock start time) of a process from /proc, or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    return fields[0], BOOT + int(fields[19]) / CLK_TCK  # fields 3 and 22 of stat(5)


def wait_for(fn, timeout, what, interval=0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(interval)


class Proxy:
    """A TCP forwarder 127.0.0.1:port -> 127.0.0.1:target that can be cut: `refuse` closes every connection
    and the listening socket; `blackhole` keeps both but forwards nothing; `open` restores (connections held
    during a blackhole are closed then, as a long partition would have reset them)."""

    def __init__(self, target):
        self.target = target
        self.mode = "open"
        self.lock = threading.Lock()
        self.conns = []  # [client, upstream or None]
        self.stopping = False
        self.listener = self._listen(0)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    @staticmethod
    def _listen(port):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen(64)
        s.settimeout(0.1)
        return s

    def _accept(self):
        while not self.stopping:
            with self.lock:
                listener = self.listener
            if listener is None:
                time.sleep(0.05)
                continue
            try:
                client, _ = listener.accept()
            except (socket.timeout, OSError):
                continue
            with self.lock:
                if self.mode == "blackhole":
                    self.conns.append([client, None])
                    continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                client.close()
                continue
            pair = [client, upstream]
            with self.lock:
                self.conns.append(pair)
            threading.Thread(target=self._pump, args=(pair,), daemon=True).start()

    def _pump(self, pair):
        client, upstream = pair
        peer = {client: upstream, upstream: client}
        try:
            while not self.stopping:
                with self.lock:
                    if pair not in self.conns:
                        return
                    frozen = self.mode == "blackhole"
                if frozen:
                    time.sleep(0.05)
                    continue
                ready, _, _ = select.select([client, upstream], [], [], 0.1)
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    peer[s].sendall(data)
        except OSError:
            pass
        finally:
            self._drop(pair)

    def _drop(self, pair):
        with self.lock:
            if pair in self.conns:
                self.conns.remove(pair)
        for s in pair:
            if s is not None:
                try:
                    s.close()
                except OSError:
                    pass

    def set_mode(self, mode):
        with self.lock:
            old, self.mode = self.mode, mode
            drop = list(self.conns) if mode == "refuse" or (old == "blackhole" and mode == "open") else []
            if mode == "refuse" and self.listener is not None:
                self.listener.close()
                self.listener = None
            if mode != "refuse" and self.listener is None:
                self.listener = self._listen(self.port)
        for pair in drop:
            self._drop(pair)

    def close(self):
        self.stopping = True
        self.set_mode("refuse")


class RankWatch:
    """Polls the rank files and /proc every 50 ms: per rank process, its start, when it was last alive."""

    def __init__(self, out):
        self.out = out
        self.procs = {}  # pid -> {"job", "attempt", "rank", "start", "last_alive", "first_line"}
        self.lock = threading.Lock()
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopping:
            self.poll()
            time.sleep(0.05)

    def poll(self):
        now = time.time()
        for name in os.listdir(self.out):
            job, attempt, rank, pid = name.rsplit("-", 3)
            pid = int(pid)
            with self.lock:
                p = self.procs.setdefault(pid, {"job": job, "attempt": int(attempt[1:]), "rank": int(rank[1:]),
                                                "start": None, "last_alive": 0.0, "first_line": None})
            try:
                with open(os.path.join(self.out, name)) as f:
                    lines = f.read().split()
            except FileNotFoundError:
                continue
            st = proc_start(pid)
            with self.lock:
                if lines:
                    p["first_line"] = p["first_line"] or float(lines[0])
                    p["last_alive"] = max(p["last_alive"], float(lines[-1]))
                if st is not None:
                    state, start = st
                    if p["start"] is None and p["first_line"] is not None and start <= p["first_line"] + 0.02:
                        p["start"] = start
                    if state != "Z" and p["start"] is not None and abs(start - p["start"]) < 0.05:
                        p["last_alive"] = max(p["last_alive"], now)

    def snapshot(self):
        with self.lock:
            return {pid: dict(p) for pid, p in self.procs.items()}

    def alive(self, attempt_pred):
        out = []
        for pid, p in self.snapshot().items():
            st = proc_start(pid)
            if attempt_pred(p["attempt"]) and st is not None and st[0] != "Z" and p["start"] is not None \
                    and abs(st[1] - p["start"]) < 0.05:
                out.append(pid)
        return out

    def close(self):
        self.stopping = True
        self.thread.join()


class Cluster:
    def __init__(self, shepherdd, work):
        self.shepherdd, self.work = shepherdd, work
        self.agents = {}
        with open(self.path("config.json"), "w") as f:
            json.dump(DAEMON_CONFIG, f)
        self.daemon_log = open(self.path("daemon.log"), "w")
        self.daemon = subprocess.Popen(
            [shepherdd, "--listen", "127.0.0.1:0", "--db", self.path("shepherd.db"), "--port-file",
             self.path("port"), "--config", self.path("config.json")],
            stdout=self.daemon_log, stderr=subprocess.STDOUT)
        self.port = int(wait_for(self._port, 30, "the daemon's port file"))
        self.url = "http://127.0.0.1:%d" % self.port
        self.proxy = Proxy(self.port)

    def path(self, *parts):
        return os.path.join(self.work, *parts)

    def _port(self):
        if self.daemon.poll() is not None:
            raise RuntimeError("shepherdd exited: " + open(self.path("daemon.log")).read())
        try:
            with open(self.path("port")) as f:
                return f.read().strip() or None
        except FileNotFoundError:
            return None

    def api(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def start_agent(self, node, leaf, spare=False, via_proxy=False):
        server = "http://127.0.0.1:%d" % (self.proxy.port if via_proxy else self.port)
        args = [self.shepherdd, "agent", "--server", server, "--node-id", node, "--gpus", "2", "--topology",
                "spine=s0,leaf=" + leaf, "--hostname", "127.0.0.1", "--state-dir", self.path("agent-" + node),
                "--heartbeat-interval", "0.5", "--stop-grace", "1", "--long-poll-wait", "5"]
        if spare:
            args.append("--spare")
        if os.geteuid() == 0:
            args.append("--allow-root-ranks")
        with open(self.path("agent-%s.log" % node), "a") as log:
            self.agents[node] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        wait_for(lambda: self.api("GET", "/v1/nodes/" + node)[1].get("agent_attached"), 30, node + " attached")

    def findings(self):
        out, cursor = [], None
        while True:
            status, page = self.api("GET", "/v1/failures" + ("?cursor=" + cursor if cursor else ""))
            assert status == 200, (status, page)
            out += page["failures"]
            cursor = page.get("next_cursor")
            if not cursor:
                return out

    def close(self):
        for p in self.agents.values():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
        status, jobs = self.api("GET", "/v1/jobs")
        for job in (jobs or {}).get("jobs", []):
            if job["state"] in ("launching", "running", "recovering", "queued"):
                self.api("POST", "/v1/jobs/%s/cancel" % job["id"])
        for p in self.agents.values():
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=10)
        self.proxy.close()
        self.daemon.send_signal(signal.SIGTERM)
        try:
            self.daemon.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.daemon.kill()
        self.daemon_log.close()


def job_spec(out):
    return {
        "name": "orphan-bench",
        "model": {"parameters": 1e6, "layers": 2, "hidden": 64, "heads": 4, "seq_len": 64, "vocab": 1000},
        "training": {"global_batch_size": 64, "micro_batch_size": 1},
        "parallelism": {"tp": 1, "pp": 1, "dp": 4, "zero_stage": 0},
        "resources": {"gpus": 4, "gpus_per_node": 2},
        "command": [sys.executable, "-c", RANK_CODE, out],
        # The ranks never report (no client): no rank heartbeat verdicts within a run.
        "policy": {"startup_grace_s": 900, "restart_backoff_s": 0.5, "launch_timeout_s": 60},
    }


def run_once(shepherdd, scenario, silence, keep):
    work = tempfile.mkdtemp(prefix="orphan-bench-")
    out = os.path.join(work, "ranks")
    os.mkdir(out)
    c = Cluster(shepherdd, work)
    watch = RankWatch(out)
    try:
        c.start_agent("n0", "l0")
        c.start_agent("n1", "l0", via_proxy=True)
        c.start_agent("sp0", "l0", spare=True)
        c.start_agent("sp1", "l1", spare=True)
        status, job = c.api("POST", "/v1/jobs", job_spec(out))
        assert status == 201, (status, job)
        job = job["id"]
        wait_for(lambda: c.api("GET", "/v1/jobs/" + job)[1]["state"] == "running", 60, "the job running")
        wait_for(lambda: len([p for p in watch.snapshot().values() if p["attempt"] == 1 and p["start"]]) == 4, 30,
                 "four attempt-1 ranks writing")
        status, placement = c.api("GET", "/v1/jobs/%s/placement" % job)
        assert "n1" in {r["node"] for r in placement["ranks"]}, placement
        time.sleep(1)  # a steady state before the fault (not a correctness wait)
        before = len(c.findings())

        agent = c.agents["n1"]
        t0 = time.time()
        if scenario == "sigstop":
            agent.send_signal(signal.SIGSTOP)
        else:
            c.proxy.set_mode(scenario.split("-")[1])

        def new_ranks():
            ps = [p for p in watch.snapshot().values() if p["attempt"] >= 2 and p["first_line"]]
            return ps if len({p["rank"] for p in ps}) == 4 else None

        resumed_err = None
        try:
            wait_for(new_ranks, silence + 60, "every rank of a new attempt running")
        except TimeoutError as e:
            resumed_err = str(e)
        resumed = time.time() - t0
        left = silence - (time.time() - t0)
        if left > 0:
            time.sleep(left)  # the silence lasts SILENCE seconds in every scenario
        if scenario == "sigstop":
            agent.send_signal(signal.SIGCONT)
        else:
            c.proxy.set_mode("open")
        healed = time.time() - t0
        # After the silence the old ranks must be gone (fenced, or stopped by the agent that answers again).
        try:
            wait_for(lambda: not watch.alive(lambda a: a == 1), 30, "attempt-1 ranks gone", interval=0.05)
        except TimeoutError:
            pass
        watch.poll()
        procs = watch.snapshot()
        old = [p for p in procs.values() if p["attempt"] == 1]
        new = [p for p in procs.values() if p["attempt"] >= 2]
        old_last = max(p["last_alive"] for p in old)
        new_first = min((p["start"] or p["first_line"]) for p in new) if new else None
        events = []
        for p in procs.values():
            events += [(p["start"] or p["first_line"], 1), (p["last_alive"], -1)]
        alive = max_procs = 0
        for _, d in sorted(events, key=lambda e: (e[0], e[1])):
            alive += d
            max_procs = max(max_procs, alive)
        kinds = [f["kind"] for f in c.findings()[before:]]
        still = watch.alive(lambda a: a == 1)
        return {
            "scenario": scenario,
            "old_last": old_last - t0,
            "old_still_alive": len(still),
            "new_first": None if new_first is None else new_first - t0,
            "overlap": None if new_first is None else max(0.0, old_last - new_first),
            "resumed": None if resumed_err else resumed,
            "healed": healed,
            "max_procs": max_procs,
            "findings": kinds,
            "error": resumed_err,
        }
    finally:
        watch.close()
        c.close()
        for pid, p in watch.snapshot().items():  # nothing survives a run
            st = proc_start(pid)
            if st is not None and p["start"] is not None and abs(st[1] - p["start"]) < 0.05:
                for sig in (signal.SIGCONT, signal.SIGKILL):
                    try:
                        os.killpg(pid, sig)
                    except (ProcessLookupError, PermissionError):
                        pass
        if keep:
            print("work dir kept: " + work, file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def fmt(v):
    return "-" if v is None else "%.2f" % v


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shepherdd", default=os.path.join(HERE, "../build/daemon/shepherdd"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--silence", type=float, default=20, help="seconds the agent is silent [20]")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--keep", action="store_true", help="keep each run's work dir")
    a = ap.parse_args()
    scenarios = a.scenarios.split(",")
    for s in scenarios:
        if s not in SCENARIOS:
            ap.error("unknown scenario %s" % s)
    results = []
    for s in scenarios:
        for i in range(a.reps):
            r = run_once(os.path.abspath(a.shepherdd), s, a.silence, a.keep)
            results.append(r)
            print("RESULT " + json.dumps(r), flush=True)
    print()
    print("| scenario | run | old ranks last alive s | new attempt first start s | overlap s | all new ranks "
          "running s | max rank processes | findings |")
    print("|---|---|---|---|---|---|---|---|")
    for s in scenarios:
        for i, r in enumerate([r for r in results if r["scenario"] == s]):
            print("| %s | %d | %s%s | %s | **%s** | %s | %d | %s |" % (
                s, i + 1, fmt(r["old_last"]), " (%d still alive)" % r["old_still_alive"] if r["old_still_alive"]
                else "", fmt(r["new_first"]), fmt(r["overlap"]), fmt(r["resumed"]), r["max_procs"],
                ", ".join(r["findings"]) or "none"))
    worst = max((r["overlap"] or 0) for r in results)
    print("\nsilence %.0f s (node timeout %s s, lease %s s); worst overlap %.2f s" % (
        a.silence, DAEMON_CONFIG["node_heartbeat_timeout_s"], DAEMON_CONFIG["agent_lease_s"], worst))
    return 0 if worst == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
