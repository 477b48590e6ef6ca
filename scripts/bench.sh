#!/usr/bin/env bash
# make bench / make bench-engine: `shipnotify-bench run`, each workload on a
# fresh Temporal server of its own (a workload's leftovers never weigh on
# the next), PostgreSQL in a schema of its own, dropped after.
#
#   scripts/bench.sh [bench flags]           a private dev server (SQLite, WAL; ports 7243/8243, or
#                                            SHIPNOTIFY_BENCH_{TEMPORAL,UI}_PORT beside another checkout's)
#   scripts/bench.sh --engine [bench flags]  the PostgreSQL-backed server make test-engine builds
#   scripts/bench.sh --engine --horizontal [horizontal flags]
#                                            `shipnotify-bench horizontal` once, on a fresh server:
#                                            the product's workers scaled beside two serve replicas,
#                                            one of each SIGKILLed mid-run (make bench-horizontal);
#                                            out/bench-horizontal.json and .txt
#   scripts/bench.sh [--engine] --fairness [fairness flags]
#                                            `shipnotify-bench fairness` once, on a fresh server:
#                                            a noisy tenant's burst beside a quiet tenant's steady
#                                            work (make bench-fairness); out/bench-fairness.json and
#                                            .txt (the engine: out/bench-engine-fairness.*)
#
# Each workload writes out/bench-<workload>.json (the engine: out/bench-engine-
# <workload>.json); they are merged into out/bench.json (out/bench-engine.json),
# whose table is printed at the end. --workloads picks and orders workloads.
# burst and catchup run twice, against the realistic mail provider (burst,
# catchup) and the instant one (burst-instant, catchup-instant), so the
# report sets them side by side; coldburst (a burst whose workers restart
# before the due instant) and steady run against the realistic one.
set -euo pipefail
cd "$(dirname "$0")/.."

engine=false
if [ "${1:-}" = --engine ]; then engine=true; shift; fi
horizontal=false
if [ "${1:-}" = --horizontal ]; then horizontal=true; shift; fi
fairness=false
if [ "${1:-}" = --fairness ]; then fairness=true; shift; fi
horizontal_args=("$@")
workloads=burst,burst-instant,coldburst,catchup,catchup-instant,steady,hold,slow,outage,mirror,events
args=()
print=()
while [ $# -gt 0 ]; do
  case "$1" in
    --workloads) workloads=$2; shift 2 ;;
    --workloads=*) workloads=${1#*=}; shift ;;
    --json) print+=(--json); shift ;;
    *) args+=("$1"); shift ;;
  esac
done

if $engine; then
  # shellcheck source=scripts/engine.sh
  source scripts/engine.sh # helpers only when sourced
  prefix=out/bench-engine
  label="Temporal server $server_version, PostgreSQL persistence (fresh per workload)"
  install_temporal; install_postgres; install_server
  server_pid_alive && die "an engine server already runs (scripts/engine.sh down stops it); the benchmark starts its own per workload"
  fresh_server() { server_up; }
  stop_server() { server_down; }
  server_pid_file="$dev/server.pid"
  env_of() { print_engine_env; }
else
  export SHIPNOTIFY_DEV_TEMPORAL_PORT=${SHIPNOTIFY_BENCH_TEMPORAL_PORT:-7243} SHIPNOTIFY_DEV_UI_PORT=${SHIPNOTIFY_BENCH_UI_PORT:-8243} \
    SHIPNOTIFY_DEV_TEMPORAL_DIR="$PWD/.dev/temporal-bench"
  # shellcheck source=scripts/dev.sh
  source scripts/dev.sh # helpers only when sourced
  prefix=out/bench
  label="Temporal dev server $temporal_version, SQLite with WAL (fresh per workload)"
  install_temporal; install_postgres
  temporal_healthy "$(temporal_bin)" && die "something already serves 127.0.0.1:$temporal_port; the benchmark starts its own server per workload"
  fresh_server() { rm -rf "$temporal_dir"; temporal_up; }
  stop_server() { temporal_down; }
  server_pid_file="$temporal_dir/pid"
  env_of() { print_env; }
fi
mkdir -p "$dev" .dev/bin out
go build -o .dev/bin/shipnotify ./cmd/shipnotify
go build -o .dev/bin/shipnotify-bench ./cmd/shipnotify-bench

pg_was_up=false; pg_running "$(pg_datadir)" && pg_was_up=true
cleanup() {
  trap '' PIPE INT TERM
  stop_server
  $pg_was_up || pg_down
}
trap cleanup EXIT
# Ctrl-C reaches the benchmark (same process group); the loop then stops.
interrupted=false
trap 'interrupted=true' INT TERM
pg_up

if $horizontal; then
  # One measurement on one fresh server: its runs compare worker counts
  # within a round, on the same server.
  fresh_server
  set -a; eval "$(env_of)"; set +a
  label="${label% (fresh per workload)} (one fresh server for the whole measurement)"
  say "== horizontal on a fresh server"
  status=0
  .dev/bin/shipnotify-bench horizontal --engine "$label" --bin .dev/bin/shipnotify --out out/bench-horizontal.json \
    --server-pid-file "$server_pid_file" --postgres-pid-file "$(pg_datadir)/postmaster.pid" \
    --server-metrics "http://127.0.0.1:$((port + 20))/metrics" \
    "${horizontal_args[@]}" | tee out/bench-horizontal.txt || status=$?
  exit $status
fi

if $fairness; then
  # One measurement on one fresh server: the quiet tenant alone and beside
  # the noisy one are compared within the run.
  fresh_server
  set -a; eval "$(env_of)"; set +a
  label="${label% (fresh per workload)} (one fresh server for the whole measurement)"
  say "== fairness on a fresh server"
  status=0
  .dev/bin/shipnotify-bench fairness --engine "$label" --bin .dev/bin/shipnotify --out "$prefix-fairness.json" \
    "${horizontal_args[@]}" | tee "$prefix-fairness.txt" || status=$?
  exit $status
fi

status=0
parts=()
for w in ${workloads//,/ }; do
  $interrupted && break
  part="$prefix-$w.json"
  rm -f "$part"
  fresh_server
  set -a; eval "$(env_of)"; set +a
  ceiling=()
  # --rate auto: the lean burst of this invocation with steady's provider
  # (steady: burst; steady-instant: burst-instant) sets the steady rate.
  case "$w" in steady*) burst_part="$prefix-burst${w#steady}.json" ;; *) burst_part= ;; esac
  for p in "${parts[@]}"; do [ "$p" = "$burst_part" ] && ceiling=(--ceiling-from "$p"); done
  say "== $w on a fresh server"
  .dev/bin/shipnotify-bench run --workloads "$w" --out "$part" --engine "$label" \
    --server-pid-file "$server_pid_file" --postgres-pid-file "$(pg_datadir)/postmaster.pid" \
    "${ceiling[@]}" "${args[@]}" >"$prefix-$w.txt" || status=$?
  stop_server
  [ -f "$part" ] && parts+=("$part")
done
if [ ${#parts[@]} -gt 0 ]; then
  .dev/bin/shipnotify-bench run --merge "$(IFS=,; echo "${parts[*]}")" --out "$prefix.json" "${print[@]}" || status=$?
fi
exit $status
