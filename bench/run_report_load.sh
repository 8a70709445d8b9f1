#!/usr/bin/env bash
# Report-ingestion benchmark: shepherdd against 131,072 simulated ranks, and nginx as this machine's HTTP
# ceiling, in one run. Builds nothing.
#
#   bench/run_report_load.sh [BUILD_DIR]        (default /work/main/build-bench)
#
# Needs BUILD_DIR/daemon/shepherdd and BUILD_DIR/bench/report_load, curl, python3, taskset, and nginx
# (Debian nginx-light; installed with apt-get when missing). Everything listens on 127.0.0.1 only.
# Knobs (environment): DURATION (open-loop seconds, 20), MAX_DURATION (closed-loop seconds, 10),
# CONNECTIONS (32), RATE (Hz, 1), STEP_EVERY (a step report every N ticks, 4), DAEMON_CPU (0), LOAD_CPU (1),
# PERF=1 (perf record -g the daemon over both of its runs; perf.data is kept), KEEP=1 (keep the work dir),
# WAIT_QUIET=S (wait up to S s, before submitting the job, for the shared machine to be idle), ETCD=1 (the
# daemon keeps its state in a one-member etcd started here, on DAEMON_CPU, instead of SQLite, both with
# their transaction limits raised to fit the job's placement).
# Steps: (1) inventory of 16,896 nodes (32 spines x 16 leaves x 33 nodes, 1 spare per leaf; 131,072 usable
# GPUs), shepherdd on 127.0.0.1:0, one job TP 8 x PP 16 x DP 1024; (2) report_load --max, then open loop at
# 131,072 ranks x RATE Hz, with the daemon's CPU (utime+stime from /proc/PID/stat) and RSS (VmRSS);
# (3) the same two loads against nginx (worker_processes 1, return 204); (4) a table. A trap stops what
# this script started.
set -euo pipefail

BUILD=${1:-/work/main/build-bench}
DURATION=${DURATION:-20}
MAX_DURATION=${MAX_DURATION:-10}
CONNECTIONS=${CONNECTIONS:-32}
RATE=${RATE:-1}
STEP_EVERY=${STEP_EVERY:-4}
DAEMON_CPU=${DAEMON_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
RANKS=131072

DAEMON=$BUILD/daemon/shepherdd
LOAD=$BUILD/bench/report_load
for f in "$DAEMON" "$LOAD"; do
  [[ -x $f ]] || { echo "missing $f (build: cmake --build $BUILD --target shepherdd report_load)" >&2; exit 2; }
done

WORK=$(mktemp -d /tmp/report-load.XXXXXX)
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [[ ${KEEP:-0} == 1 || ${PERF:-0} == 1 ]]; then echo "work dir kept: $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
CLK_TCK=$(getconf CLK_TCK)
cpu_ticks() { # utime + stime of PID, in clock ticks (fields 14 and 15; the comm field may hold spaces)
  local rest
  rest=$(sed 's/^.*) //' "/proc/$1/stat")
  awk '{print $12 + $13}' <<<"$rest"
}
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
now_s() { date +%s.%N; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }
field() { # field KEY RESULT_LINE
  tr ' ' '\n' <<<"$2" | awk -F= -v k="$1" '$1 == k {print $2}'
}

# run_load NAME PID ARGS...: report_load on LOAD_CPU while measuring PID's CPU; sets RES_<NAME> and CPU_<NAME>.
run_load() {
  local name=$1 pid=$2; shift 2
  local t0 c0 t1 c1 out rc=0
  t0=$(now_s); c0=$(cpu_ticks "$pid")
  out=$(taskset -c "$LOAD_CPU" "$LOAD" "$@") || rc=$?
  t1=$(now_s); c1=$(cpu_ticks "$pid")
  echo "$out" | sed 's/^/    /' >&2
  [[ $rc == 0 ]] || log "report_load exited $rc (errors or non-2xx answers; see above)"
  if grep -q 'server says: .*([1-9][0-9]* ignored)' <<<"$out"; then
    log "WARNING: the daemon ignored reports (their attempt is no longer current): the job was restarted"
  fi
  printf -v "RES_$name" '%s' "$(grep '^RESULT ' <<<"$out" || true)"
  printf -v "CPU_$name" '%s' "$(awk -v a="$c0" -v b="$c1" -v t0="$t0" -v t1="$t1" -v hz="$CLK_TCK" \
    'BEGIN {printf "%.0f", 100 * (b - a) / hz / (t1 - t0)}')"
}

# ---- (1) inventory, daemon, job -------------------------------------------------------------------------
log "work dir $WORK"
"$DAEMON" gen-inventory --spines 32 --leaves-per-spine 16 --nodes-per-leaf 33 --spares-per-leaf 1 \
  -o "$WORK/inventory.json"
STORE_ARGS=(--db "$WORK/db")
if [[ ${ETCD:-0} == 1 ]]; then
  EPORT=$(free_port); PPORT=$(free_port)
  taskset -c "$DAEMON_CPU" etcd --name bench --data-dir "$WORK/etcd" \
    --listen-client-urls "http://127.0.0.1:$EPORT" --advertise-client-urls "http://127.0.0.1:$EPORT" \
    --listen-peer-urls "http://127.0.0.1:$PPORT" --initial-advertise-peer-urls "http://127.0.0.1:$PPORT" \
    --initial-cluster "bench=http://127.0.0.1:$PPORT" --max-txn-ops 65536 --max-request-bytes 33554432 \
    >"$WORK/etcd.log" 2>&1 &
  PIDS+=("$!")
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$EPORT/health" >/dev/null && break; sleep 0.1; done
  # Placing the 16,384-node job is one write of 16,390 operations (5.5 MB): limits raised on both sides.
  echo '{"etcd_max_txn_ops": 65536, "etcd_max_request_bytes": 33554432}' >"$WORK/etcd-limits.json"
  STORE_ARGS=(--store "etcd://127.0.0.1:$EPORT" --config "$WORK/etcd-limits.json")
  log "etcd on port $EPORT"
fi
taskset -c "$DAEMON_CPU" "$DAEMON" --listen 127.0.0.1:0 "${STORE_ARGS[@]}" --port-file "$WORK/port" \
  --inventory "$WORK/inventory.json" >"$WORK/shepherdd.log" 2>&1 &
DPID=$!
PIDS+=("$DPID")
log "shepherdd pid $DPID loading 16,896 nodes"
for _ in $(seq 600); do
  [[ -s $WORK/port ]] && break
  kill -0 "$DPID" 2>/dev/null || { tail -20 "$WORK/shepherdd.log" >&2; exit 1; }
  sleep 0.2
done
[[ -s $WORK/port ]] || { log "shepherdd wrote no port file within 120 s"; exit 1; }
PORT=$(cat "$WORK/port")
BASE=http://127.0.0.1:$PORT
for _ in $(seq 100); do
  [[ $(curl -s -o /dev/null -w '%{http_code}' "$BASE/readyz") == 200 ]] && break
  sleep 0.1
done
sleep 1
RSS_INV=$(rss_kib "$DPID")
log "shepherdd ready on port $PORT, RSS $RSS_INV KiB with the inventory"

# Before the job is submitted: its 120 s startup grace counts from the attempt start (not from the first
# report), so the loads must begin soon after the submit.
# The machine is shared: with WAIT_QUIET=S, wait up to S seconds for 3 consecutive seconds in which the
# machine's CPUs are at least 90 % idle (the daemon idles meanwhile), so other work does not take core 0.
busy_pct() { # whole-machine busy % over one second, from /proc/stat
  local a b
  a=($(head -1 /proc/stat)); sleep 1; b=($(head -1 /proc/stat))
  awk -v a="${a[*]}" -v b="${b[*]}" 'BEGIN {
    n = split(a, x, " "); split(b, y, " "); t = 0
    for (i = 2; i <= n; ++i) t += y[i] - x[i]
    idle = (y[5] - x[5]) + (y[6] - x[6]); printf "%.0f", (t > 0 ? 100 * (t - idle) / t : 0) }'
}
if (( ${WAIT_QUIET:-0} > 0 )); then
  quiet=0; deadline=$(( SECONDS + WAIT_QUIET ))
  while (( quiet < 3 && SECONDS < deadline )); do
    if (( $(busy_pct) <= 10 )); then quiet=$(( quiet + 1 )); else quiet=0; fi
  done
  (( quiet >= 3 )) && log "machine quiet" || log "machine still busy after $WAIT_QUIET s; measuring anyway"
fi
cat >"$WORK/job.json" <<'EOF'
{"name": "report-load-405b",
 "model": {"parameters": 405e9, "layers": 128, "hidden": 16384, "heads": 128, "seq_len": 4096, "vocab": 128256},
 "training": {"micro_batch_size": 1, "global_batch_size": 16384, "precision": "bf16", "optimizer": "adam",
              "activation_recompute": "selective"},
 "parallelism": {"tp": 8, "pp": 16, "dp": 1024, "zero_stage": 1},
 "resources": {"gpus": 131072, "gpus_per_node": 8}}
EOF
code=$(curl -s -o "$WORK/job.out" -w '%{http_code}' -H 'Content-Type: application/json' \
  --data-binary @"$WORK/job.json" "$BASE/v1/jobs")
if [[ $code != 201 ]]; then
  log "POST /v1/jobs answered $code:"; head -c 2000 "$WORK/job.out" >&2; echo >&2; exit 1
fi
read -r JOB STATE < <(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["id"], j["state"])' "$WORK/job.out")
# A job no agent launches is `launching` until its first report, then `running`.
[[ $STATE == running || $STATE == launching ]] || { log "job $JOB is $STATE, not placed"; exit 1; }
RSS_JOB=$(rss_kib "$DPID")
log "job $JOB running (RSS $RSS_JOB KiB); fetching its placement"
PLACEMENT_S=$(curl -sf "$BASE/v1/jobs/$JOB/placement" -o "$WORK/placement.json" -w '%{time_total}')
RSS_PLACEMENT=$(rss_kib "$DPID")
log "GET placement: $(stat -c %s "$WORK/placement.json") bytes in $PLACEMENT_S s; RSS now $RSS_PLACEMENT KiB"
# Rank order for batching: the ranks of each node together (one request per node), nodes in first-seen order.
python3 - "$WORK/placement.json" "$WORK/rank_order.txt" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
by_node = {}
for r in p["ranks"]:
    by_node.setdefault(r["node"], []).append(r["rank"])
sizes = {len(v) for v in by_node.values()}
assert sizes == {8}, f"ranks per node: {sorted(sizes)}"
with open(sys.argv[2], "w") as f:
    for ranks in by_node.values():
        for r in sorted(ranks):
            f.write(f"{r}\n")
print(f"{len(p['ranks'])} ranks on {len(by_node)} nodes", file=sys.stderr)
EOF

log "machine busy before the runs: $(busy_pct) % of $(nproc) CPUs"

# ---- (2) load against shepherdd -------------------------------------------------------------------------
COMMON=(--port "$PORT" --job "$JOB" --ranks "$RANKS" --connections "$CONNECTIONS" --batch 8
        --step-every "$STEP_EVERY" --rank-order "$WORK/rank_order.txt")
PERF_PID=
if [[ ${PERF:-0} == 1 ]]; then
  perf record -g -o "$WORK/perf.data" -p "$DPID" >"$WORK/perf.log" 2>&1 &
  PERF_PID=$!
  PIDS+=("$PERF_PID")
  sleep 1
fi
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
log "shepherdd: closed loop (--max) for $MAX_DURATION s"
run_load SMAX "$DPID" "${COMMON[@]}" --max --duration "$MAX_DURATION"
RSS_MAX=$(rss_kib "$DPID")
NEXT_TICK=$(field next_tick "$RES_SMAX")
# Continue the steps where --max stopped, at a step tick, so the window holds DURATION/STEP_EVERY step ticks.
if (( STEP_EVERY > 0 )); then NEXT_TICK=$(( (NEXT_TICK + STEP_EVERY - 1) / STEP_EVERY * STEP_EVERY )); fi
log "shepherdd: open loop, $RANKS ranks x $RATE Hz for $DURATION s"
run_load SOPEN "$DPID" "${COMMON[@]}" --rate "$RATE" --duration "$DURATION" --first-tick "${NEXT_TICK:-0}" \
  --latency-log "$WORK/shepherdd_open_latency.txt"
RSS_LOAD=$(rss_kib "$DPID")
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
if [[ -n $PERF_PID ]]; then kill -INT "$PERF_PID" 2>/dev/null || true; wait "$PERF_PID" 2>/dev/null || true; fi
curl -s "$BASE/v1/jobs/$JOB/health" -o "$WORK/health.json" || true
HEALTH=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("status"))' "$WORK/health.json" 2>/dev/null || echo "?")
FINDINGS=$(curl -s "$BASE/v1/jobs/$JOB/failures" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["failures"]))' 2>/dev/null || echo "?")
log "job health after the load: $HEALTH, findings: $FINDINGS"

# ---- (3) nginx: the HTTP ceiling of this machine --------------------------------------------------------
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
if [[ ! -x $NGINX ]]; then
  log "installing nginx-light"
  apt-get install -y nginx-light >/dev/null
  NGINX=/usr/sbin/nginx
fi
NPORT=$(free_port)
NG=$WORK/nginx
mkdir -p "$NG/logs" "$NG/tmp"
cat >"$NG/nginx.conf" <<EOF
worker_processes 1;
daemon off;
master_process off;
pid $NG/nginx.pid;
error_log $NG/logs/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $NG/tmp/body;
  proxy_temp_path $NG/tmp/proxy;
  fastcgi_temp_path $NG/tmp/fastcgi;
  uwsgi_temp_path $NG/tmp/uwsgi;
  scgi_temp_path $NG/tmp/scgi;
  client_max_body_size 4m;
  client_body_buffer_size 64k;
  keepalive_requests 100000000;
  keepalive_timeout 60s;
  server {
    listen 127.0.0.1:$NPORT;
    location / { return 204; }
  }
}
EOF
taskset -c "$DAEMON_CPU" "$NGINX" -p "$NG" -e "$NG/logs/error.log" -c "$NG/nginx.conf" >"$NG/logs/stdout.log" 2>&1 &
NPID=$!
PIDS+=("$NPID")
for _ in $(seq 100); do
  [[ $(curl -s -o /dev/null -w '%{http_code}' -X POST --data x "http://127.0.0.1:$NPORT/x" 2>/dev/null) == 204 ]] && break
  kill -0 "$NPID" 2>/dev/null || { cat "$NG/logs/error.log" >&2; exit 1; }
  sleep 0.1
done
log "nginx pid $NPID on port $NPORT"
NCOMMON=(--port "$NPORT" --job "$JOB" --ranks "$RANKS" --connections "$CONNECTIONS" --batch 8
         --step-every "$STEP_EVERY" --rank-order "$WORK/rank_order.txt")
log "nginx: closed loop (--max) for $MAX_DURATION s"
run_load NMAX "$NPID" "${NCOMMON[@]}" --max --duration "$MAX_DURATION"
log "nginx: open loop, $RANKS ranks x $RATE Hz for $DURATION s"
run_load NOPEN "$NPID" "${NCOMMON[@]}" --rate "$RATE" --duration "$DURATION"

# ---- (4) table ------------------------------------------------------------------------------------------
row() { # row LABEL RESULT CPU
  local r=$2
  printf '| %-28s | %9s | %9s | %8s | %8s | %8s | %8s | %8s | %6s | %7s | %5s | %9s |\n' "$1" \
    "$(field target_reports_s "$r")" "$(field reports_s "$r")" "$(field requests_s "$r")" \
    "$(field p50_ms "$r")" "$(field p90_ms "$r")" "$(field p99_ms "$r")" "$(field max_ms "$r")" \
    "$(( $(field errors "$r") + $(field unsent "$r") + $(field timed_out "$r") ))" "$(field non2xx "$r")" "$3%" \
    "$(awk -v r="$(field reports_s "$r")" -v c="$3" 'BEGIN {printf "%.0f", (c > 0 ? r / (c / 100) : 0)}')"
}
echo
echo "Report ingestion: $RANKS ranks, 8 ranks (one node) per request, heartbeat every tick + step report every" \
     "$STEP_EVERY ticks, $CONNECTIONS connections; server on CPU $DAEMON_CPU, report_load on CPU $LOAD_CPU"
echo
echo "| run                          | target/s  | reports/s | req/s    | p50 ms   | p90 ms   | p99 ms   | max ms   | errors | non-2xx | CPU   | rep/CPU-s |"
echo "|------------------------------|----------:|----------:|---------:|---------:|---------:|---------:|---------:|-------:|--------:|------:|----------:|"
row "shepherdd --max ($MAX_DURATION s)" "$RES_SMAX" "$CPU_SMAX"
row "shepherdd $RANKS x $RATE Hz" "$RES_SOPEN" "$CPU_SOPEN"
row "nginx 204 --max ($MAX_DURATION s)" "$RES_NMAX" "$CPU_NMAX"
row "nginx 204 $RANKS x $RATE Hz" "$RES_NOPEN" "$CPU_NOPEN"
echo
awk -v inv="$RSS_INV" -v job="$RSS_JOB" -v pl="$RSS_PLACEMENT" -v mx="$RSS_MAX" -v ld="$RSS_LOAD" -v n="$RANKS" 'BEGIN {
  printf "shepherdd RSS: %.1f MiB with the inventory, %.1f MiB after the job submit, %.1f MiB after GET placement, %.1f MiB after --max, %.1f MiB after the open-loop load\n", inv/1024, job/1024, pl/1024, mx/1024, ld/1024
  printf "RSS per rank: (%d - %d) KiB / %d = %.0f bytes (job submit %.0f, GET placement %.0f, reports %.0f bytes per rank)\n", ld, inv, n, (ld - inv) * 1024 / n, (job - inv) * 1024 / n, (pl - job) * 1024 / n, (ld - pl) * 1024 / n
}'
echo "generator CPU (% of one core): shepherdd --max $(field gen_cpu_pct "$RES_SMAX"), open $(field gen_cpu_pct "$RES_SOPEN");" \
     "nginx --max $(field gen_cpu_pct "$RES_NMAX"), open $(field gen_cpu_pct "$RES_NOPEN")"
echo "GET /v1/jobs/$JOB/placement took $PLACEMENT_S s (the daemon's one thread is busy meanwhile)"
echo "job health after the load: $HEALTH; findings: $FINDINGS"
echo "shepherdd open loop, p99 latency (ms) per second of scheduled time (S = a step-report tick):"
python3 - "$WORK/shepherdd_open_latency.txt" "${NEXT_TICK:-0}" "$STEP_EVERY" <<'EOF'
import collections, sys
by_s = collections.defaultdict(list)
for line in open(sys.argv[1]):
    t, ms = line.split()
    by_s[int(float(t))].append(float(ms))
first, every = int(sys.argv[2]), int(sys.argv[3])
cells = []
for s in sorted(by_s):
    v = sorted(by_s[s])
    mark = "S" if every > 0 and (first + s) % every == 0 else ""
    cells.append(f"{s}{mark}:{v[min(len(v) - 1, int(len(v) * 0.99))]:.0f}")
print("  " + " ".join(cells))
EOF
echo "load average (1/5/15 min) before the shepherdd runs: $LOAD_BEFORE; after: $LOAD_AFTER ($(nproc) CPUs)"
