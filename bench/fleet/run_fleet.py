#!/usr/bin/env python3
"""Fleet simulator run: the real shepherdd against bench/fleet/fleet_sim (every agent and rank of a fleet).

    bench/fleet/run_fleet.py --size 16k  --healthy-s 1800 --fault-s 600 --out fleet-16k.json
    bench/fleet/run_fleet.py --size 131k --healthy-s 180  --fault-s 240 --shards 4 --close-each --out fleet-131k.json
    bench/fleet/run_fleet.py --size smoke                                   (16 nodes, about a minute)

Starts shepherdd (SQLite in a temp dir, 127.0.0.1 port 0, the inventory of the size, a config holding only
`max_connections`, raised for three connections per agent plus headroom, and for --size smoke a 3 s node
timeout and 8 s lease), raises both processes' open-files limit, runs fleet_sim (which submits the jobs
once every agent is attached, runs a healthy period, then injects faults one at a time), and meanwhile
samples the daemon's CPU (utime+stime, /proc/PID/stat) and RSS every 2 s and probes GET /healthz every
0.25 s from a separate keep-alive connection. With --shards N the simulator runs as N processes, each
playing every Nth node (a fleet whose connections exceed one process's open-files limit); shard 0 keeps
the timeline, the faults and the findings, and the others' traffic is added in. Prints and writes one
JSON summary. Exit 0 when the run
completed (the figures say whether goals were met); 1 when it could not run.
"""
import argparse
import http.client
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = {  # spines, leaves per spine, nodes per leaf (one of them a spare)
    "smoke": (1, 2, 9),       # 18 nodes: 16 + 2 spares
    "16k": (4, 17, 33),       # 2,244 nodes: 2,176 + 68 spares; the 2,048-node job and small jobs
    "131k": (32, 16, 33),     # 16,896 nodes: 16,384 + 512 spares; one 131,072-rank job
}
MODEL_405B = {"parameters": 405e9, "layers": 128, "hidden": 16384, "heads": 128, "seq_len": 4096, "vocab": 128256}
MODEL_8B = {"parameters": 8e9, "layers": 32, "hidden": 4096, "heads": 32, "seq_len": 4096, "vocab": 128256}


def job(name, model, tp, pp, dp, sdc_every):
    return {"name": name, "model": model, "command": ["python3", "train.py"],
            "training": {"micro_batch_size": 1, "global_batch_size": dp * 16, "precision": "bf16",
                         "optimizer": "adam", "activation_recompute": "selective"},
            "parallelism": {"tp": tp, "pp": pp, "dp": dp, "zero_stage": 1},
            "resources": {"gpus": tp * pp * dp, "gpus_per_node": 8},
            "policy": {"max_restarts": 1000, "sdc_check_every_steps": sdc_every}}


def jobs_for(size):
    if size == "smoke":
        return [job("smoke-big", MODEL_8B, 8, 2, 4, 10), job("smoke-small", MODEL_8B, 8, 1, 4, 10)]
    if size == "16k":
        return ([job("llama3-405b", MODEL_405B, 8, 16, 128, 20)] +
                [job(f"small-{i}", MODEL_8B, 8, 1, 4, 20) for i in range(4)])
    return [job("llama3-405b-131k", MODEL_405B, 8, 16, 1024, 20)]


def raise_nofile():
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1 << 20, 1 << 20))
    except (ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return int(rest[11]) + int(rest[12])


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def pct(values):
    if not values:
        return None
    v = sorted(values)
    q = lambda p: v[min(len(v) - 1, max(0, int(-(-p * len(v) // 1)) - 1))]
    return {"n": len(v), "p50": q(0.5), "p99": q(0.99), "max": v[-1]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=sorted(SIZES), default="16k")
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("--daemon", help="shepherdd binary (default BUILD/daemon/shepherdd)")
    ap.add_argument("--sim", help="fleet_sim binary (default BUILD/bench/fleet_sim)")
    ap.add_argument("--healthy-s", type=float)
    ap.add_argument("--fault-s", type=float)
    ap.add_argument("--fault-gap-s", type=float, default=20)
    ap.add_argument("--step-s", type=float)
    ap.add_argument("--faults", default="", help="fault kinds injected first, comma-separated (fleet_sim names)")
    ap.add_argument("--telemetry", choices=["direct", "relay"], default="direct")
    ap.add_argument("--rank-reports", choices=["summary", "heartbeat"], default="summary")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--close-each", action="store_true",
                    help="heartbeats and report posts on a fresh connection each (only the long polls stay open)")
    ap.add_argument("--heartbeat-s", type=float, default=1,
                    help="the agents' heartbeat interval (agent --heartbeat-interval)")
    ap.add_argument("--shards", type=int, default=1,
                    help="simulator processes, each playing every Nth node "
                         "(a fleet past one process's open-files limit)")
    ap.add_argument("--out", default="")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the daemon and simulator are stopped
    smoke = a.size == "smoke"
    healthy_s = a.healthy_s if a.healthy_s is not None else (10 if smoke else 600)
    fault_s = a.fault_s if a.fault_s is not None else (20 if smoke else 300)
    step_s = a.step_s or (1 if smoke else 5)
    daemon = a.daemon or os.path.join(a.build, "daemon", "shepherdd")
    sim = a.sim or os.path.join(a.build, "bench", "fleet_sim")
    for f in (daemon, sim):
        if not os.access(f, os.X_OK):
            print(f"missing {f} (ninja -C build shepherdd fleet_sim)", file=sys.stderr)
            return 1
    work = tempfile.mkdtemp(prefix="fleet-")
    procs = []
    try:
        spines, leaves, per_leaf = SIZES[a.size]
        inv = os.path.join(work, "inventory.json")
        subprocess.run([daemon, "gen-inventory", "--spines", str(spines), "--leaves-per-spine", str(leaves),
                        "--nodes-per-leaf", str(per_leaf), "--spares-per-leaf", "1", "-o", inv], check=True)
        nodes = spines * leaves * per_leaf
        config = {"max_connections": 3 * nodes + 4096}
        if smoke:
            config.update({"node_heartbeat_timeout_s": 3, "agent_lease_s": 8})
        with open(os.path.join(work, "config.json"), "w") as f:
            json.dump(config, f)
        job_files = []
        for i, j in enumerate(jobs_for(a.size)):
            p = os.path.join(work, f"job{i}.json")
            with open(p, "w") as f:
                json.dump(j, f)
            job_files.append(p)
        log = open(os.path.join(work, "shepherdd.log"), "w")
        d = subprocess.Popen([daemon, "--listen", "127.0.0.1:0", "--db", os.path.join(work, "db"),
                              "--port-file", os.path.join(work, "port"), "--inventory", inv,
                              "--config", os.path.join(work, "config.json")],
                             stdout=log, stderr=subprocess.STDOUT, preexec_fn=raise_nofile)
        procs.append(d)
        port_file = os.path.join(work, "port")
        deadline = time.time() + 300
        while not (os.path.exists(port_file) and os.path.getsize(port_file) > 0):
            if d.poll() is not None or time.time() > deadline:
                print(open(os.path.join(work, "shepherdd.log")).read()[-3000:], file=sys.stderr)
                return 1
            time.sleep(0.2)
        port = int(open(port_file).read().strip())
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/readyz")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                return 1
            time.sleep(0.2)
        print(f"[run_fleet] shepherdd pid {d.pid} port {port}, {nodes} nodes, work dir {work}", file=sys.stderr)

        stop = threading.Event()
        samples, probes = [], []
        hz = os.sysconf("SC_CLK_TCK")

        def sampler():
            while not stop.is_set():
                try:
                    samples.append((time.time(), cpu_ticks(d.pid) / hz, rss_kib(d.pid)))
                except OSError:
                    return
                stop.wait(2)

        def prober():
            c = None
            while not stop.is_set():
                t0 = time.time()
                try:
                    if c is None:
                        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                    c.request("GET", "/healthz")
                    r = c.getresponse()
                    r.read()
                    probes.append((t0, time.time() - t0, r.status))
                except OSError as e:
                    probes.append((t0, time.time() - t0, 0))
                    c = None
                stop.wait(0.25)

        threads = [threading.Thread(target=sampler, daemon=True), threading.Thread(target=prober, daemon=True)]
        for t in threads:
            t.start()
        out_sim = os.path.join(work, "sim.json")
        cmd = [sim, "--port", str(port), "--inventory", inv, "--healthy-s", str(healthy_s),
               "--fault-s", str(fault_s), "--fault-gap-s", str(a.fault_gap_s), "--step-s", str(step_s),
               "--telemetry", a.telemetry, "--rank-reports", a.rank_reports, "--seed", str(a.seed),
               "--heartbeat-s", str(a.heartbeat_s)]
        if a.faults:
            cmd += ["--faults", a.faults]
        if a.close_each:
            cmd += ["--close-each"]
        for p in job_files:
            cmd += ["--job", p]
        shard_outs = [out_sim] + [os.path.join(work, f"sim-{i}.json") for i in range(1, a.shards)]
        ready = os.path.join(work, "ready")
        os.makedirs(ready)
        shards = []
        for i in range(a.shards):
            extra = ["--out", shard_outs[i]]
            if a.shards > 1:
                extra += ["--shard", f"{i}/{a.shards}", "--ready-dir", ready]
            shards.append(subprocess.Popen(cmd + extra, stdout=subprocess.DEVNULL, preexec_fn=raise_nofile))
        procs.extend(shards)
        s = shards[0]  # shard 0 runs the timeline; the others run until told to stop
        s.wait()
        for o in shards[1:]:
            o.send_signal(signal.SIGTERM)
            o.wait(60)
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)  # the simulator (and gen-inventory): reaped
        sim_cpu_s = ru.ru_utime + ru.ru_stime
        stop.set()
        for t in threads:
            t.join(15)
        metrics = ""
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("GET", "/metrics")
            metrics = c.getresponse().read().decode()
        except OSError:
            pass
        if s.returncode != 0 or not os.path.exists(out_sim):
            print(f"[run_fleet] fleet_sim exited {s.returncode}", file=sys.stderr)
            return 1
        r = json.load(open(out_sim))
        tl = r["timeline"]
        others = [json.load(open(p)) for p in shard_outs[1:] if os.path.exists(p)]
        if len(others) != a.shards - 1:
            print(f"[run_fleet] {a.shards - 1 - len(others)} shard(s) wrote no result", file=sys.stderr)
            return 1
        for o in others:  # traffic adds up; the timeline, injections and findings are shard 0's
            for k, v in o["traffic"].items():
                r["traffic"][k] += v

        def window(t0, t1):
            w = [x for x in samples if t0 <= x[0] <= t1]
            if len(w) < 2 or not t0:
                return None
            cores = (w[-1][1] - w[0][1]) / (w[-1][0] - w[0][0])
            pr = [p[1] for p in probes if t0 <= p[0] <= t1]
            return {"seconds": round(w[-1][0] - w[0][0], 1), "daemon_cores": round(cores, 3),
                    "daemon_rss_mib_max": round(max(x[2] for x in w) / 1024, 1),
                    "healthz_s": pct(pr), "healthz_failed": sum(1 for p in probes if t0 <= p[0] <= t1 and p[2] != 200)}

        hb, he = r.get("healthy_begin") or {}, r.get("healthy_end") or {}
        rates = None
        for x in [r] + others:  # each shard's rates over its own healthy window, summed
            xb, xe = x.get("healthy_begin") or {}, x.get("healthy_end") or {}
            if not (xb and xe and xe["at"] > xb["at"]):
                rates = None
                break
            dt = xe["at"] - xb["at"]
            rates = rates or {"requests_per_s": 0, "bytes_in_per_s": 0, "reports_per_s": 0}
            rates["requests_per_s"] += round((xe["requests"] - xb["requests"]) / dt, 1)
            rates["bytes_in_per_s"] += round((xe["bytes_out"] - xb["bytes_out"]) / dt)
            rates["reports_per_s"] += round((xe["reports"] - xb["reports"]) / dt, 1)
        restarts_healthy = sum(max(0, v - 1) for v in (he.get("attempts") or {}).values())
        metric_lines = [l for l in metrics.splitlines() if l.startswith(("shepherd_reports_total", "shepherd_heartbeat_ignored_total",
                                                                         "shepherd_reports_ignored_total", "shepherd_nodes{"))]
        summary = {
            "size": a.size, "nodes": nodes, "ranks": sum(j["ranks"] for j in r["jobs"]),
            "config": config, "close_each": a.close_each,
            "heartbeat_s": a.heartbeat_s, "shards": a.shards, "telemetry": a.telemetry, "rank_reports": a.rank_reports, "step_s": step_s,
            "machine": {"cpus": os.cpu_count(), "loadavg_end": open("/proc/loadavg").read().split()[:3]},
            "healthy": dict(window(tl["healthy_start"], tl["faults_start"]) or {}, **(rates or {}),
                            false_findings=r["false_findings"], restarts=restarts_healthy),
            "faults": window(tl["faults_start"], tl["end"]),
            "whole_run": window(tl["start"], tl["end"]),
            "simulator_cpu_cores": round(sim_cpu_s / max(1e-9, tl["end"] - tl["start"]), 3),
            "startup_s": {"agents_attached": round(tl["attached"] - tl["start"], 1),
                          "jobs_stepping": round(tl["healthy_start"] - tl["attached"], 1) if tl["healthy_start"] else None},
            "injected": len(r["injections"]), "found": r["found"], "attributed": r["attributed"],
            "replaced": r["replaced"], "replaced_same_leaf": r["replaced_same_leaf"],
            "detect_s": r["detect_s"], "reassign_s": r["reassign_s"], "by_kind": r["by_kind"],
            "traffic": r["traffic"], "jobs": r["jobs"], "metrics": metric_lines[:40],
            "injections": r["injections"], "false_findings_list": r["false_findings_list"][:20],
        }
        text = json.dumps(summary, indent=1)
        print(text)
        if a.out:
            with open(a.out, "w") as f:
                f.write(text + "\n")
        return 0
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        if a.keep:
            print(f"[run_fleet] work dir kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
