#!/usr/bin/env python3
"""Helpers for bench/run_load_faults.sh (stdlib only; keep-alive http.client connections).

  load_probe.py probe URL SECONDS OUT            GET /healthz every 20 ms; writes "p50 p99 max n failed" (ms)
  load_probe.py storm URL SECONDS CLIENTS OUT    CLIENTS threads GET /v1/nodes (one page) in a loop;
                                                 writes "requests p50_ms p99_ms bytes_per_page"
  load_probe.py submit URL COUNT GPUS OUT [KEEP] COUNT sequential POST /v1/jobs (COUNT/16 at a time in 16
                                                 threads); writes "p50_ms p90_ms p99_ms n_201 n_other";
                                                 cancels them afterwards unless KEEP=keep
  load_probe.py findings URL                     prints the number of findings (all pages of /v1/failures)
"""
import http.client
import json
import sys
import threading
import time
import urllib.parse


def conn(url, timeout=30):
    u = urllib.parse.urlparse(url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * (len(xs) - 1) + 0.5))]


def get(c, path):
    c.request("GET", path)
    r = c.getresponse()
    return r.status, r.read()


def probe(url, seconds, out):
    c = conn(url)
    lat, failed = [], 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        try:
            status, _ = get(c, "/healthz")
            if status != 200:
                failed += 1
        except Exception:  # noqa: BLE001 - counted, the probe goes on
            failed += 1
            c = conn(url)
        lat.append((time.monotonic() - t0) * 1e3)
        time.sleep(max(0.0, 0.02 - (time.monotonic() - t0)))
    with open(out, "w") as f:
        f.write("%.2f %.2f %.2f %d %d\n" % (pct(lat, 0.5), pct(lat, 0.99), max(lat or [0]), len(lat), failed))


def storm(url, seconds, clients, out):
    lat, sizes, lock = [], [], threading.Lock()
    end = time.monotonic() + seconds

    def run():
        c = conn(url)
        while time.monotonic() < end:
            t0 = time.monotonic()
            try:
                status, body = get(c, "/v1/nodes")
            except Exception:  # noqa: BLE001
                c = conn(url)
                continue
            with lock:
                lat.append((time.monotonic() - t0) * 1e3)
                sizes.append(len(body))

    ts = [threading.Thread(target=run) for _ in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    with open(out, "w") as f:
        f.write("%d %.2f %.2f %d\n" % (len(lat), pct(lat, 0.5), pct(lat, 0.99), max(sizes or [0])))


def job_body(gpus):
    return json.dumps({
        "name": "fill",
        "model": {"parameters": 1e9, "layers": 8, "hidden": 1024, "heads": 8, "seq_len": 1024},
        "training": {"global_batch_size": 64},
        "parallelism": {"tp": 8, "pp": 1, "dp": gpus // 8},
        "resources": {"gpus": gpus},
        "command": ["true"]})


def submit(url, count, gpus, out, keep):
    lat, ok, other, ids, lock = [], 0, 0, [], threading.Lock()
    body = job_body(gpus)
    per = max(1, count // 16)

    def run(n):
        nonlocal ok, other
        c = conn(url)
        for _ in range(n):
            t0 = time.monotonic()
            c.request("POST", "/v1/jobs", body, {"Content-Type": "application/json"})
            r = c.getresponse()
            data = r.read()
            with lock:
                lat.append((time.monotonic() - t0) * 1e3)
                if r.status == 201:
                    ok += 1
                    ids.append(json.loads(data)["id"])
                else:
                    other += 1

    threads = [threading.Thread(target=run, args=(per,)) for _ in range(count // per)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if keep != "keep":
        c = conn(url)
        for i in ids:
            c.request("POST", "/v1/jobs/%s/cancel" % i)
            c.getresponse().read()
    with open(out, "w") as f:
        f.write("%.2f %.2f %.2f %d %d\n" % (pct(lat, 0.5), pct(lat, 0.9), pct(lat, 0.99), ok, other))


def findings(url):
    c = conn(url, timeout=300)  # after a stall the daemon may first work through a backlog
    n, cursor = 0, None
    while True:
        status, body = get(c, "/v1/failures?limit=1000" + ("&cursor=" + cursor if cursor else ""))
        page = json.loads(body)
        n += len(page["failures"])
        cursor = page.get("next_cursor")
        if not cursor:
            break
    print(n)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "probe":
        probe(sys.argv[2], float(sys.argv[3]), sys.argv[4])
    elif cmd == "storm":
        storm(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    elif cmd == "submit":
        submit(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5],
               sys.argv[6] if len(sys.argv) > 6 else "")
    elif cmd == "findings":
        findings(sys.argv[2])
