#!/usr/bin/env bash
# Load and fault benchmark at fleet scale: the real shepherdd on loopback with 20,480 nodes, one
# RANKS-rank job (every rank reporting at RATE Hz, a step report every 4th tick), FILL_JOBS more jobs, and four scenarios, each with a /healthz
# prober (every 20 ms): (a) reports only, (b) reports + a read storm (STORM_CLIENTS clients looping
# GET /v1/nodes), (c) reports + a 12 s SIGSTOP of the daemon, and the write latency (POST /v1/jobs) at
# 20,480 nodes with 0 jobs and with FILL_JOBS + 1 jobs. Findings are counted (GET /v1/failures, all pages)
# before and after each scenario: every one is false (nothing is faulty here).
#
#   bench/run_load_faults.sh [BUILD_DIR]        (default ./build)
#
# Knobs: DURATION (s per scenario, 30), RATE (Hz, 1), RANKS (131072), FILL_JOBS (5000), STORM_CLIENTS (16),
# STALL_S (12), CONNECTIONS (32), DAEMON_CPU (0), LOAD_CPU (1), KEEP=1 (keep the work dir).
# Not covered here: the silent-agent / orphan-overlap scenario (real agents and ranks): bench/orphan_overlap.py.
set -euo pipefail

BUILD=${1:-./build}
DURATION=${DURATION:-30}
RATE=${RATE:-1}
RANKS=${RANKS:-131072}
FILL_JOBS=${FILL_JOBS:-5000}
STORM_CLIENTS=${STORM_CLIENTS:-16}
STALL_S=${STALL_S:-12}
CONNECTIONS=${CONNECTIONS:-32}
DAEMON_CPU=${DAEMON_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
HERE=$(cd "$(dirname "$0")" && pwd)
DAEMON=$BUILD/daemon/shepherdd
LOAD=$BUILD/bench/report_load
PROBE="python3 $HERE/load_probe.py"
for f in "$DAEMON" "$LOAD"; do [[ -x $f ]] || { echo "missing $f" >&2; exit 2; }; done

WORK=$(mktemp -d /tmp/load-faults.XXXXXX)
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill -CONT "$pid" 2>/dev/null || true; kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ ${KEEP:-0} == 1 ]]; then echo "work dir kept: $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

# ---- daemon, inventory, the reporting job, the fill ------------------------------------------------------
"$DAEMON" gen-inventory --spines 32 --leaves-per-spine 16 --nodes-per-leaf 40 --spares-per-leaf 1 \
  -o "$WORK/inventory.json"
taskset -c "$DAEMON_CPU" "$DAEMON" --listen 127.0.0.1:0 --db "$WORK/db" --port-file "$WORK/port" \
  --inventory "$WORK/inventory.json" --log-level warn >"$WORK/shepherdd.log" 2>&1 &
DPID=$!
PIDS+=("$DPID")
for _ in $(seq 1200); do [[ -s $WORK/port ]] && break; kill -0 "$DPID" || exit 1; sleep 0.1; done
PORT=$(cat "$WORK/port")
BASE=http://127.0.0.1:$PORT
log "shepherdd pid $DPID on $PORT with $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["nodes"]))' "$WORK/inventory.json") nodes"

$PROBE submit "$BASE" 64 8 "$WORK/w_empty.txt"
log "POST /v1/jobs at 20,480 nodes, 0 jobs: p50 p90 p99 ms, 201s, others: $(cat "$WORK/w_empty.txt")"

# One job of RANKS ranks (TP 8 x PP 16 x DP RANKS/128), every one of which reports.
cat >"$WORK/job.json" <<JSON
{"name": "load-405b",
 "model": {"parameters": 405e9, "layers": 128, "hidden": 16384, "heads": 128, "seq_len": 4096, "vocab": 128256},
 "training": {"micro_batch_size": 1, "global_batch_size": 16384, "precision": "bf16", "optimizer": "adam"},
 "parallelism": {"tp": 8, "pp": 16, "dp": $(( RANKS / 128 )), "zero_stage": 1},
 "resources": {"gpus": $RANKS, "gpus_per_node": 8},
 "policy": {"startup_grace_s": 900}}
JSON
JOB=$(curl -sf -H 'Content-Type: application/json' --data-binary @"$WORK/job.json" "$BASE/v1/jobs" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
curl -sf "$BASE/v1/jobs/$JOB/placement" -o "$WORK/placement.json"
python3 - "$WORK/placement.json" "$WORK/rank_order.txt" <<'PY'
import json, sys
by_node = {}
for r in json.load(open(sys.argv[1]))["ranks"]:
    by_node.setdefault(r["node"], []).append(r["rank"])
with open(sys.argv[2], "w") as f:
    for ranks in by_node.values():
        f.writelines(f"{r}\n" for r in sorted(ranks))
PY
log "job $JOB placed ($RANKS ranks); filling with $FILL_JOBS jobs"
T0=$SECONDS
$PROBE submit "$BASE" "$FILL_JOBS" 16 "$WORK/w_fill.txt" keep
log "fill: $(cat "$WORK/w_fill.txt") in $(( SECONDS - T0 )) s"
$PROBE submit "$BASE" 64 8 "$WORK/w_full.txt"
log "POST /v1/jobs at 20,480 nodes, $((FILL_JOBS + 1)) jobs: $(cat "$WORK/w_full.txt")"

# ---- scenarios --------------------------------------------------------------------------------------------
TICK=0
# scenario NAME EXTRA_SECONDS: reports for DURATION+EXTRA s with the prober; sets R_<NAME> (report_load
# RESULT), H_<NAME> (probe) and F_<NAME> (new findings).
scenario() {
  local name=$1 extra=$2 before after secs=$(( DURATION + $2 ))
  before=$($PROBE findings "$BASE" || echo 0)
  $PROBE probe "$BASE" "$secs" "$WORK/probe_$name.txt" &
  local probe=$!
  out=$(taskset -c "$LOAD_CPU" "$LOAD" --port "$PORT" --job "$JOB" --ranks "$RANKS" --rate "$RATE" \
    --duration "$secs" --connections "$CONNECTIONS" --batch 8 --rank-order "$WORK/rank_order.txt" \
    --first-tick "$TICK" --drain 15 || true)
  wait "$probe"
  TICK=$(tr ' ' '\n' <<<"$(grep '^RESULT' <<<"$out")" | awk -F= '$1 == "next_tick" {print $2}')
  TICK=${TICK:-0}
  after=$($PROBE findings "$BASE" || echo "$before")
  printf -v "R_$name" '%s' "$(grep '^RESULT' <<<"$out")"
  printf -v "H_$name" '%s' "$(cat "$WORK/probe_$name.txt")"
  printf -v "F_$name" '%s' "$(( after - before ))"
  log "$name: $(grep '^RESULT' <<<"$out" | cut -c1-200)"
  log "$name: healthz p50 p99 max n failed = $(cat "$WORK/probe_$name.txt"); new findings $(( after - before ))"
}

scenario base 0
$PROBE storm "$BASE" "$DURATION" "$STORM_CLIENTS" "$WORK/storm.txt" &
STORM=$!
scenario storm 0
wait "$STORM"
log "storm: requests p50 p99 ms, page bytes = $(cat "$WORK/storm.txt")"
( sleep 5; kill -STOP "$DPID"; sleep "$STALL_S"; kill -CONT "$DPID" ) &
STALLER=$!
scenario stall "$STALL_S"
wait "$STALLER"

field() { tr ' ' '\n' <<<"$2" | awk -F= -v k="$1" '$1 == k {print $2}'; }
echo
echo "| scenario | reports/s | report p50 / p99 ms | non-2xx | /healthz p50 / p99 / max ms (n, failed) | new findings |"
echo "|---|---|---|---|---|---|"
for s in base storm stall; do
  r=R_$s; h=H_$s; f=F_$s
  read -r hp50 hp99 hmax hn hfail <<<"${!h}"
  echo "| $s | $(field reports_s "${!r}") | $(field p50_ms "${!r}") / $(field p99_ms "${!r}") | $(field non2xx "${!r}") | $hp50 / $hp99 / $hmax ($hn, $hfail) | ${!f} |"
done
read -r sreq sp50 sp99 sbytes <<<"$(cat "$WORK/storm.txt")"
echo
echo "read storm: $sreq GET /v1/nodes in $DURATION s by $STORM_CLIENTS clients, p50 $sp50 ms, p99 $sp99 ms, $sbytes bytes a page"
read -r e50 e90 e99 _ _ <<<"$(cat "$WORK/w_empty.txt")"
read -r f50 f90 f99 _ _ <<<"$(cat "$WORK/w_full.txt")"
echo "POST /v1/jobs p50/p90/p99 ms: 20,480 nodes + 0 jobs $e50/$e90/$e99; + $((FILL_JOBS + 1)) jobs $f50/$f90/$f99"
