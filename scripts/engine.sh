#!/usr/bin/env bash
# The Temporal server users deploy (docker-compose.yml's temporalio/server),
# run without Docker for `make test-engine`: the server and its SQL tool built
# with go install at the version in deploy/temporal/VERSION, PostgreSQL
# persistence and SQL visibility on a private cluster under .dev/engine/, the
# default namespace and our search attributes. It runs beside the dev server,
# on other ports (frontend 127.0.0.1:7433, PostgreSQL 54339 or the next free).
#
#   scripts/engine.sh install        build the server and SQL tool if missing (about 6 min, once per machine)
#   scripts/engine.sh up             start PostgreSQL and a fresh server, namespace and search attributes
#   scripts/engine.sh run -- CMD...  up, run CMD with the env below, then stop what this call started
#   scripts/engine.sh test           run: the suite on the engine, then the two-worker end-to-end run
#   scripts/engine.sh down           stop what scripts/engine.sh started, nothing else
#   scripts/engine.sh env            print the environment the tests use
set -euo pipefail

# PostgreSQL helpers and the pinned Temporal CLI come from scripts/dev.sh;
# its cluster functions work on $dev, which is ours from here on.
# shellcheck source=scripts/dev.sh
source "$(dirname "${BASH_SOURCE[0]}")/dev.sh"
dev="$root/.dev/engine"
pg_default_port=${SHIPNOTIFY_ENGINE_PG_PORT:-54339}
port=${SHIPNOTIFY_ENGINE_PORT:-7433}
server_version=v$(tr -d '[:space:]' < "$root/deploy/temporal/VERSION")
bindir=${SHIPNOTIFY_ENGINE_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/shipnotify/temporal-server-$server_version}
dynamic_config="$root/deploy/temporal/dynamicconfig.yaml"

say() { printf 'engine: %s\n' "$*" >&2 2>/dev/null || true; }
die() { say "$*"; exit 1; }

# --- the server and its SQL tool ---------------------------------------------

# built reports whether $bindir/$1 was built from the pinned server module.
built() {
  go version -m "$bindir/$1" 2>/dev/null | grep -qE "^\s+mod\s+go.temporal.io/server\s+$server_version\b"
}

install_server() {
  built server && built sql && return 0
  say "building the Temporal server $server_version and its SQL tool into $bindir (about 6 minutes, once per machine)"
  mkdir -p "$bindir"
  GOBIN="$bindir" GOFLAGS=-mod=mod go install \
    "go.temporal.io/server/cmd/server@$server_version" "go.temporal.io/server/cmd/tools/sql@$server_version"
  built server && built sql || die "the Temporal server did not install"
}

# module_dir is the server module's source: its config and schema files.
module_dir() {
  local dir
  dir=$(cd / && GOFLAGS=-mod=mod go mod download -json "go.temporal.io/server@$server_version" |
    sed -n 's/^\s*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [ -d "$dir/schema/postgresql/v12" ] || die "the server module's schema files are missing (go mod download go.temporal.io/server@$server_version)"
  echo "$dir"
}

# --- PostgreSQL persistence ----------------------------------------------------

pg_port_now() { cat "$(pg_datadir).port"; }
psql_pg() { PGOPTIONS='-c client_min_messages=warning' psql -h 127.0.0.1 -p "$(pg_port_now)" -U postgres -v ON_ERROR_STOP=1 -qtA "$@"; }

# fresh_schema drops Temporal's databases and builds them again with
# deploy/temporal/schema.sh, as docker-compose.yml's temporal-schema does.
fresh_schema() {
  if ! psql_pg -c "SELECT 1 FROM pg_roles WHERE rolname = 'temporal'" | grep -q 1; then
    psql_pg -c "CREATE ROLE temporal LOGIN CREATEDB PASSWORD 'temporal'" >/dev/null
  fi
  psql_pg -c "DROP DATABASE IF EXISTS temporal WITH (FORCE)" -c "DROP DATABASE IF EXISTS temporal_visibility WITH (FORCE)" >/dev/null
  say "creating Temporal's databases and schemas"
  SQL_PLUGIN=postgres12 SQL_HOST=127.0.0.1 SQL_PORT="$(pg_port_now)" SQL_USER=temporal SQL_PASSWORD=temporal \
    TEMPORAL_SQL_TOOL="$bindir/sql" TEMPORAL_SCHEMA_DIR="$(module_dir)/schema/postgresql/v12" \
    sh "$root/deploy/temporal/schema.sh" >"$dev/schema.log" 2>&1 ||
    { tail -20 "$dev/schema.log" >&2; die "the schema setup failed (log: $dev/schema.log)"; }
}

# --- the server ------------------------------------------------------------------

# Ports: the frontend on $port, the other services just above it, their
# membership ports 600 below; pprof off.
declare -A port_map
set_ports() {
  port_map=(
    [7233]=$port [7234]=$((port + 1)) [7235]=$((port + 2)) [7239]=$((port + 6)) [7243]=$((port + 10))
    [6933]=$((port - 600)) [6934]=$((port - 599)) [6935]=$((port - 598)) [6939]=$((port - 594))
    [8000]=$((port + 20))
  )
}

# write_config derives the server's config from the module's
# development-postgres12.yaml: our ports, our PostgreSQL, the dynamic config
# docker-compose.yml mounts, warnings only in the log.
write_config() {
  local src cfg old args=()
  src="$(module_dir)/config/development-postgres12.yaml"
  cfg="$dev/server/config"
  mkdir -p "$cfg"
  for old in "${!port_map[@]}"; do args+=(-e "s/\b$old\b/${port_map[$old]}/g"); done
  sed "${args[@]}" \
    -e "s/\b5432\b/$(pg_port_now)/g" \
    -e 's/^\(\s*port:\) 7936$/\1 0/' \
    -e 's/^\(\s*level:\) info$/\1 warn/' \
    -e "s|^\(\s*filepath:\) .*$|\1 \"$dynamic_config\"|" \
    "$src" > "$cfg/development-postgres12.yaml"
  # A later server version may lay the file out differently: check each change.
  local want
  for want in "grpcPort: $port" "connectAddr: \"127.0.0.1:$(pg_port_now)\"" "rpcAddress: \"localhost:$port\"" \
    "port: 0" "level: warn" "filepath: \"$dynamic_config\"" "listenAddress: \"127.0.0.1:$((port + 20))\""; do
    grep -qF "$want" "$cfg/development-postgres12.yaml" || die "could not derive the server config from $src ($want)"
  done
  local check
  check=$("$bindir/server" validate-dynamic-config "$dynamic_config" 2>&1)
  if grep -qiE 'warning|error' <<<"$check"; then die "deploy/temporal/dynamicconfig.yaml: $check"; fi
}

server_pid_alive() { [ -f "$dev/server.pid" ] && kill -0 "$(cat "$dev/server.pid")" 2>/dev/null; }

server_healthy() { "$(temporal_bin)" operator cluster health --address "127.0.0.1:$port" >/dev/null 2>&1; }

server_up() {
  server_pid_alive && server_healthy && return 0
  server_pid_alive && server_down
  local p
  for p in "${port_map[@]}"; do
    port_busy "$p" && die "port $p is taken; pick other ports with SHIPNOTIFY_ENGINE_PORT (now $port)"
  done
  fresh_schema
  write_config
  say "starting the Temporal server $server_version on 127.0.0.1:$port (PostgreSQL on $(pg_port_now))"
  # Its own session, so a Ctrl-C meant for the tests does not reach it.
  setsid "$bindir/server" --root "$dev/server" --config config --env development-postgres12 --allow-no-auth start \
    >"$dev/server.log" 2>&1 </dev/null &
  echo $! > "$dev/server.pid"
  local i
  for i in $(seq 1 240); do
    server_healthy && break
    server_pid_alive || { tail -20 "$dev/server.log" >&2; die "the Temporal server exited (log: $dev/server.log)"; }
    [ "$i" -lt 240 ] || die "the Temporal server did not become healthy in 2 minutes (log: $dev/server.log)"
    sleep 0.5
  done
  TEMPORAL_ADDRESS="127.0.0.1:$port" TEMPORAL_CLI="$(temporal_bin)" sh "$root/deploy/temporal/namespace.sh" >&2
  say "registering the search attributes (shipnotify setup)"
  mkdir -p "$dev/bin"
  go build -o "$dev/bin/shipnotify" "$root/cmd/shipnotify"
  # setup sends no payloads, so it runs without the payload keys, as in compose.
  # A namespace just created is in the database before it is in the
  # frontend's namespace cache ("Namespace default is not found" for a few
  # seconds): setup is idempotent, so it is tried again until it takes.
  for i in $(seq 1 60); do
    env TEMPORAL_ADDRESS="127.0.0.1:$port" TEMPORAL_NAMESPACE=default TEMPORAL_CONFIG_FILE=/nonexistent \
      SHIPNOTIFY_CODEC=off "$dev/bin/shipnotify" setup >"$dev/setup.log" 2>&1 && break
    [ "$i" -lt 60 ] || { cat "$dev/setup.log" >&2; die "shipnotify setup did not take within a minute"; }
    sleep 1
  done
  # setup returned once a start carrying the attributes was accepted (the
  # frontend takes them in at its next namespace cache refresh).
  cat "$dev/setup.log" >&2
}

server_down() {
  server_pid_alive || { rm -f "$dev/server.pid"; return 0; }
  local pid; pid=$(cat "$dev/server.pid")
  say "stopping the Temporal server"
  kill -TERM "$pid" 2>/dev/null || true
  local i
  for i in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$dev/server.pid"
}

# --- commands --------------------------------------------------------------

print_engine_env() {
  local pgport; pgport=$(pg_port_now)
  echo "TEMPORAL_ADDRESS=127.0.0.1:$port"
  echo "TEMPORAL_NAMESPACE=default"
  echo "DATABASE_URL=postgres://postgres@127.0.0.1:$pgport/shipnotify?sslmode=disable"
  echo "TEST_DATABASE_URL=postgres://postgres@127.0.0.1:$pgport/shipnotify_test?sslmode=disable"
  echo "SHIPNOTIFY_CODEC_KEYS_FILE=$(codec_keys)"
  echo "SHIPNOTIFY_DEV_TEMPORAL_BIN=$(temporal_bin)"
  echo "SHIPNOTIFY_ENGINE_DIR=$dev"
  echo "SHIPNOTIFY_ENGINE_VERSION=$server_version"
}

# engine_packages are the packages whose tests drive Temporal through the
# product (starts, Updates, queries, visibility, the workers): what differs
# on this server. The fault suite (its faults are the workers', PostgreSQL's
# and the providers', not the engine's; it kills a dev server of its own),
# the benchmark harness (make bench-engine) and the packages that never
# reach Temporal run on the dev server only. ENGINE_SUITE=all runs them all.
engine_packages=(./activities ./cmd/... ./examples ./internal/api ./internal/console ./internal/sendgridevents
  ./internal/unsubscribe ./metrics ./starter ./workflows)

# run_tests is `make test-engine`: the engine's packages, then the
# end-to-end run, each timed; both run, and either failing fails it.
run_tests() {
  local start=$SECONDS status=0 pkgs=("${engine_packages[@]}")
  [ "${ENGINE_SUITE:-}" = all ] && pkgs=(./...)
  say "== go test ${pkgs[*]} on the engine"
  go test -count=1 -timeout 20m -parallel 4 "${pkgs[@]}" "$@" || status=$?
  say "suite: $((SECONDS - start)) s"
  start=$SECONDS
  say "== the two-worker end-to-end run"
  SHIPNOTIFY_ENGINE_TEST=1 go test -count=1 -timeout 10m -v ./internal/tools/engine || status=$?
  say "end-to-end: $((SECONDS - start)) s"
  return $status
}

set_ports
# scripts/bench.sh sources this file for its helpers; the commands below
# run only when it is executed.
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

mkdir -p "$dev"
case "${1:-}" in
  install)
    install_temporal
    install_postgres
    install_server
    ;;
  up)
    install_temporal
    install_postgres
    install_server
    pg_up
    server_up
    ;;
  down)
    server_down
    pg_down
    ;;
  env)
    print_engine_env
    ;;
  run|test)
    cmd=$1
    shift
    [ "${1:-}" = "--" ] && shift
    [ "$cmd" = test ] || [ $# -gt 0 ] || die "usage: scripts/engine.sh run -- CMD..."
    install_temporal
    install_postgres
    install_server
    server_was_up=false; server_pid_alive && server_was_up=true
    pg_was_up=false; pg_running "$(pg_datadir)" && pg_was_up=true
    cleanup() {
      # Whatever happened to our output (a closed pipe), stop what we started.
      trap '' PIPE INT TERM
      $server_was_up || server_down
      $pg_was_up || pg_down
    }
    trap cleanup EXIT
    # Ctrl-C reaches the command (same process group); this shell waits for
    # it to finish and then cleans up.
    trap ':' INT TERM
    pg_up
    server_up
    set -a
    eval "$(print_engine_env)"
    set +a
    export CI=true # a missing variable fails a test instead of skipping it
    status=0
    if [ "$cmd" = test ]; then run_tests "$@" || status=$?; else "$@" || status=$?; fi
    exit $status
    ;;
  *)
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
