#!/usr/bin/env python3
"""The longest control-thread hold (shepherd_control_hold_seconds_max) while the largest heartbeat or report
batch the daemon accepts arrives five times. Auth off, loopback, one daemon it starts and kills.
Usage: bench/control_hold.py build/daemon/shepherdd heartbeat|steps|checkpoints"""
import json, os, subprocess, sys, tempfile, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostile_load import request, flight_body

def metric(port, name):
    st, raw, _ = request(port, "GET", "/metrics")
    for line in raw.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])

def main(shepherdd, kind):
    tmp = tempfile.mkdtemp(prefix="shepherd-hold-")
    pf = os.path.join(tmp, "port")
    d = subprocess.Popen([shepherdd, "--listen", "127.0.0.1:0", "--port-file", pf, "--db", tmp + "/db"],
                         stdout=open(tmp + "/log", "w"), stderr=subprocess.STDOUT)
    try:
        t = time.monotonic() + 30
        while not os.path.exists(pf) and time.monotonic() < t:
            time.sleep(0.05)
        port = int(open(pf).read())
        for n in ("n0", "n1", "nx"):
            request(port, "POST", "/v1/nodes", None, {"id": n, "hostname": n, "gpus": 1, "topology": {"spine": "s", "leaf": "l"}})
        request(port, "PATCH", "/v1/nodes/nx", None, {"schedulable": False})
        st, raw, _ = request(port, "POST", "/v1/jobs", None, {"name": "v", "command": ["/bin/true"],
            "model": {"parameters": 1e8, "layers": 4, "hidden": 512, "heads": 8, "seq_len": 512},
            "training": {"global_batch_size": 32}, "parallelism": {"tp": 1, "pp": 1, "dp": 2},
            "resources": {"gpus": 2, "gpus_per_node": 1}})
        job = json.loads(raw)["id"]
        for n in ("n0", "n1"):
            request(port, "POST", "/v1/nodes/%s/heartbeat" % n, None, {"processes": []})
        time.sleep(1)
        for n in ("n0", "n1"):
            st, raw, _ = request(port, "GET", "/v1/nodes/%s/assignments?version=-1&wait=0" % n)
            procs = [{"job": r["job"], "attempt": r["attempt"], "rank": r["rank"], "pid": 10, "state": "running"} for r in json.loads(raw)["ranks"]]
            request(port, "POST", "/v1/nodes/%s/heartbeat" % n, None, {"processes": procs})
        base = metric(port, "shepherd_control_hold_seconds_max")
        out = []
        for i in range(5):
            if kind == "heartbeat":
                body = flight_body(job, 1, 256, 8, 1900)
                st, _, took = request(port, "POST", "/v1/nodes/nx/heartbeat", None, body, timeout=120)
            elif kind == "steps":
                reps = [{"rank": k % 2, "attempt": 1, "kind": "step", "step": 2 + 500 * i + k // 2, "loss": 2.0,
                         "grad_norm": 1.0, "step_time_s": 0.5, "lr": 0.001} for k in range(1000)]
                body = json.dumps({"reports": reps}).encode()
                st, _, took = request(port, "POST", "/v1/jobs/%s/reports" % job, None, body, timeout=120)
            else:  # checkpoints: 1000 reports of rank 0 with 4000-character paths
                reps = [{"rank": 0, "attempt": 1, "kind": "checkpoint", "step": 10 + 1000 * i + k,
                         "path": "/ckpt/" + "x" * 3990 + "/%07d" % (1000 * i + k)} for k in range(1000)]
                body = json.dumps({"reports": reps}).encode()
                st, _, took = request(port, "POST", "/v1/jobs/%s/reports" % job, None, body, timeout=120)
            out.append((st, len(body), took))
        print(kind, "answers", [(s, round(b / 1048576, 2), round(t, 3)) for s, b, t in out],
              "hold max before %s s, after %s s" % (base, metric(port, "shepherd_control_hold_seconds_max")))
    finally:
        d.kill(); d.wait()

main(sys.argv[1], sys.argv[2])
