#!/usr/bin/env bash
# Shepherd developer entry point for a fresh Debian 12 machine.
#   scripts/dev.sh run [--port N]
#                         install what is missing, build the daemon, start it on 127.0.0.1:8080 (or N, or
#                         $SHEPHERD_PORT) with ./var/shepherd.db and a demo inventory (Ctrl-C stops it)
#   scripts/dev.sh test   install what is missing, build (clang++-14, -Wthread-safety -Werror), run the whole
#                         test suite (ctest -j2), then the ThreadSanitizer leg; fails if either fails
#   scripts/dev.sh tsan   the ThreadSanitizer leg alone: the control, api and integration tests and the daemon
#                         they start, built with -fsanitize=thread in build-tsan/; fails on any report
#   scripts/dev.sh build  install and build only
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR="$PWD"  # one cache for every checkout of the tree:
export CCACHE_NOHASHDIR=1     # paths under the tree are relative, and the working directory is not hashed

PACKAGES=(g++ clang-14 cmake ninja-build pkg-config libboost-dev libboost-program-options-dev nlohmann-json3-dev
          libsqlite3-dev sqlite3 libspdlog-dev libgtest-dev libgmock-dev libbenchmark-dev python3 python3-torch
          curl procps ccache
          slurm-wlm slurmd slurmctld slurm-client munge  # the local Slurm cluster of the Slurm tests
          prometheus                                     # scrapes the daemon in tests/integration/prometheus_test
          etcd-server etcd-client                        # real etcd members of the replicated-store tests
          chromium chromium-driver)                      # the dashboard's browser tests (tests/browser/)

install_missing() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# build [TARGET...]: configure, then build the targets named (all when none). With clang 14 (and libstdc++),
# whose thread-safety analysis is then part of every build: an unguarded use of control state is an error
# (SHEPHERD_THREAD_SAFETY, control/control_lock.h). The tree builds with g++ too (configure without
# CMAKE_CXX_COMPILER); the annotations are then empty.
build() {
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
  cmake --build build -j2 ${1:+--target "$@"}
}

# tsan: build the tests labelled `tsan` (tests/control, tests/api, tests/integration) and the shepherdd they
# start with ThreadSanitizer into build-tsan/, run them, and fail on any report, whether a test binary's or a
# daemon's it started: every report is written under build-tsan/tsan-reports/ (TSAN_OPTIONS log_path), and
# the leg fails when a file is there even if the test that started the process passed.
tsan() {
  # g++, whose ThreadSanitizer the leg was made clean with (clang 14's also needs libclang-rt-14-dev and is not
  # checked yet). -O1 -g1 (line tables, what a report's stacks need): a third less compile time than -O2 -g,
  # and the speed ThreadSanitizer advises.
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DSHEPHERD_SANITIZE=thread -DSHEPHERD_BUILD_BENCH=OFF >/dev/null
  cmake --build build-tsan -j2 --target tsan_tests
  local reports="$PWD/build-tsan/tsan-reports"
  rm -rf "$reports" && mkdir -p "$reports"
  local status=0
  # Not run here, by name (the main suite runs both): a timing test (17,000 nodes POSTed, then a scrape within
  # 250 ms; TSan's 5-15x slowdown makes its bound meaningless and its setup takes minutes), and a test that
  # needs a planner search to outlast a node write (under TSan the write's answer comes after the search),
  # and two hostile-input tests with time bounds (exit within 5 s of SIGTERM during a flood; a heartbeat
  # of 2,048 flight-recorder dumps handled in time): each passes alone under TSan, not beside other tests.
  local skip='^(MetricsStateScale\.|Daemon\.PlanSearchesDoNotHoldUpTheControlThread$'
  skip+='|HostileInputTest\.(SigtermDuringAFloodExitsWithinSeconds|AHeartbeatForRanksOfAnotherNodeChangesNoFindingAndIsCounted)$)'
  TSAN_OPTIONS="suppressions=$PWD/scripts/tsan.supp log_path=$reports/report second_deadlock_stack=1" \
    ctest --test-dir build-tsan -L '^tsan$' -E "$skip" -j2 --output-on-failure --timeout 600 || status=$?
  if compgen -G "$reports/report*" >/dev/null; then
    cat "$reports"/report*
    echo "ThreadSanitizer: $(cat "$reports"/report* | grep -c '^WARNING: ThreadSanitizer') report(s), in $reports" >&2
    return 1
  fi
  return $status
}

case "${1:-}" in
  run)
    port="${SHEPHERD_PORT:-8080}"
    if [ "${2:-}" = "--port" ] && [ -n "${3:-}" ]; then port="$3"; elif [ -n "${2:-}" ]; then
      echo "usage: scripts/dev.sh run [--port N]" >&2; exit 2
    fi
    install_missing
    build shepherdd shepherdctl  # the daemon and its CLI only: tests and benchmarks are built by `test`
    mkdir -p var
    [ -f var/demo-inventory.json ] || build/daemon/shepherdd gen-inventory --spines 2 --leaves-per-spine 4 \
      --nodes-per-leaf 5 --spares-per-leaf 1 -o var/demo-inventory.json
    exec build/daemon/shepherdd --listen "127.0.0.1:$port" --db var/shepherd.db --inventory var/demo-inventory.json
    ;;
  test)
    install_missing
    build
    status=0
    ctest --test-dir build -j2 --output-on-failure --timeout 600 || status=$?
    tsan || status=$?
    exit $status
    ;;
  tsan)
    install_missing
    tsan
    ;;
  build)
    install_missing
    build
    ;;
  *)
    echo "usage: scripts/dev.sh run|test|tsan|build" >&2
    exit 2
    ;;
esac
