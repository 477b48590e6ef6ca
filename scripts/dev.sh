#!/usr/bin/env bash
# The real parts shipnotify runs on, for the demo and the tests: the Temporal
# dev server (file-backed, Web UI on :8233, our search attributes registered)
# and a private PostgreSQL cluster, both under .dev/ and on loopback only.
#
#   scripts/dev.sh install         install the pinned Temporal CLI and PostgreSQL if missing
#   scripts/dev.sh install-deploy  install the pinned Helm and promtool if missing (the deploy tests')
#   scripts/dev.sh up              start both (reusing any already running) and migrate
#   scripts/dev.sh run -- CMD...   up, run CMD with the env below, then stop what this call started
#   scripts/dev.sh down            stop what scripts/dev.sh started, nothing else
#   scripts/dev.sh env             print the environment the demo and tests use
#
# SHIPNOTIFY_DEV_{TEMPORAL,UI,CODEC,PG}_PORT move the servers; the ports a
# start used are remembered under .dev/, so later calls (env, run, down) need
# them only to change them.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dev="$root/.dev"
temporal_version=v1.5.1
helm_version=v4.3.2
# A second server (make bench) lives in its own folder on its own ports.
temporal_dir=${SHIPNOTIFY_DEV_TEMPORAL_DIR:-$dev/temporal}
# The ports the dev server was last started with (its Web UI's and the codec
# server's it points the UI to), as PostgreSQL's is kept beside its cluster:
# without them, `env` would print the defaults, another checkout's server.
ports_file=$temporal_dir/ports
remembered_port() {
  [ -f "$ports_file" ] || return 0
  sed -n "s/^$1=\([0-9][0-9]*\)\$/\1/p" "$ports_file" | tail -n 1
}
# An explicit variable wins, then the remembered port, then the default.
temporal_port=${SHIPNOTIFY_DEV_TEMPORAL_PORT:-$(remembered_port temporal)}
temporal_port=${temporal_port:-7233}
ui_port=${SHIPNOTIFY_DEV_UI_PORT:-$(remembered_port ui)}
ui_port=${ui_port:-8233}
codec_port=${SHIPNOTIFY_DEV_CODEC_PORT:-$(remembered_port codec)}
codec_port=${codec_port:-8081}
pg_default_port=${SHIPNOTIFY_DEV_PG_PORT:-54329}
# Keep these in step with workflows.SearchAttributeTypes (a test checks).
search_attributes=(ShipmentId=Keyword UpdateId=Keyword ReminderState=Keyword DueAt=Datetime)

say() { printf 'dev: %s\n' "$*" >&2 2>/dev/null || true; }
die() { say "$*"; exit 1; }

# --- Temporal CLI --------------------------------------------------------

# pinned_bin prints NAME, found on PATH or in Go's bin folder, if it was
# built from MODULE at VERSION. A go-installed tool reports a development
# version of itself; the module version in its build info is the reliable one.
pinned_bin() {
  local name=$1 module=$2 version=$3 gobin candidate
  gobin="$(go env GOBIN)"; [ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"
  for candidate in "$(command -v "$name" || true)" "$gobin/$name"; do
    [ -n "$candidate" ] && [ -x "$candidate" ] || continue
    if go version -m "$candidate" 2>/dev/null | grep -qE "^\s+mod\s+$module\s+$version\b"; then
      echo "$candidate"; return 0
    fi
  done
  return 1
}

temporal_bin() { pinned_bin temporal github.com/temporalio/cli "$temporal_version"; }

install_temporal() {
  temporal_bin >/dev/null && return 0
  say "installing the Temporal CLI $temporal_version with go install: it builds from source, 3 to 6 minutes, once per machine"
  local began=$SECONDS
  GOFLAGS=-mod=mod go install "github.com/temporalio/cli/cmd/temporal@$temporal_version"
  temporal_bin >/dev/null || die "the Temporal CLI did not install"
  say "the Temporal CLI is installed ($((SECONDS - began)) s)"
}

# --- Helm ---------------------------------------------------------------

# The chart's tests (deploy) lint and render deploy/helm/shipnotify with
# the pinned Helm, built with go install as the Temporal CLI is.
helm_bin() { pinned_bin helm helm.sh/helm/v4 "$helm_version"; }

install_helm() {
  helm_bin >/dev/null && return 0
  say "installing Helm $helm_version with go install: it builds from source, 2 to 4 minutes, once per machine"
  local began=$SECONDS
  (cd / && GOFLAGS=-mod=mod go install "helm.sh/helm/v4/cmd/helm@$helm_version")
  helm_bin >/dev/null || die "Helm did not install"
  say "Helm is installed ($((SECONDS - began)) s)"
}

# --- PostgreSQL ----------------------------------------------------------

pg_bindir() {
  local d
  if d=$(command -v initdb 2>/dev/null) && [ -x "$(dirname "$d")/pg_ctl" ]; then
    dirname "$(readlink -f "$d")"; return 0
  fi
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$d/initdb" ] && { echo "$d"; return 0; }
  done
  return 1
}

install_postgres() {
  pg_bindir >/dev/null && command -v psql >/dev/null && return 0
  [ "$(id -u)" = 0 ] || die "PostgreSQL is missing; install Debian's postgresql package (needs root)"
  say "installing PostgreSQL from Debian's packages (about a minute, once per machine)"
  local began=$SECONDS
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql >&2
  pg_bindir >/dev/null || die "PostgreSQL did not install"
  say "PostgreSQL is installed ($((SECONDS - began)) s)"
}

# --- promtool ------------------------------------------------------------

# The deploy tests check the alert rules with promtool (Debian ships it in
# its prometheus package; the server it also installs is not started).
install_promtool() {
  command -v promtool >/dev/null && return 0
  [ "$(id -u)" = 0 ] || die "promtool is missing; install Debian's prometheus package (needs root)"
  say "installing promtool from Debian's prometheus package (under a minute, once per machine)"
  local began=$SECONDS
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends prometheus >&2
  command -v promtool >/dev/null || die "promtool did not install"
  say "promtool is installed ($((SECONDS - began)) s)"
}

# PostgreSQL refuses to run as root: as root, run it as the postgres user.
as_pg() {
  # From /, which the postgres user can always enter.
  if [ "$(id -u)" = 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

# The cluster lives in .dev/pg unless the postgres user cannot reach the
# checkout (a private temporary directory, say); then under /tmp, recorded
# in .dev/pg.dir so every call finds the same one.
pg_datadir() {
  if [ -f "$dev/pg.dir" ]; then cat "$dev/pg.dir"; return 0; fi
  local dir="$dev/pg"
  if [ "$(id -u)" = 0 ] && ! runuser -u postgres -- test -x "$dev" 2>/dev/null; then
    dir="/tmp/shipnotify-pg-$(printf '%s' "$dev" | sha1sum | cut -c1-12)"
  fi
  echo "$dir" > "$dev/pg.dir"
  echo "$dir"
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

pg_port() {
  local data=$1 port
  if [ -f "$data.port" ]; then cat "$data.port"; return 0; fi
  port=$pg_default_port
  while port_busy "$port"; do port=$((port + 1)); done
  echo "$port" > "$data.port"
  echo "$port"
}

pg_running() { as_pg "$(pg_bindir)/pg_ctl" status -D "$1" >/dev/null 2>&1; }

pg_up() {
  local bin data port
  bin=$(pg_bindir) || die "PostgreSQL is not installed: run scripts/dev.sh install"
  data=$(pg_datadir)
  port=$(pg_port "$data")
  if pg_running "$data"; then
    return 0
  fi
  if [ ! -f "$data/PG_VERSION" ]; then
    mkdir -p "$data"
    [ "$(id -u)" = 0 ] && chown postgres: "$data"
    chmod 700 "$data"
    say "initialising PostgreSQL in $data"
    as_pg "$bin/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --no-locale >"$dev/pg.init.log" 2>&1 \
      || { cat "$dev/pg.init.log" >&2; die "initdb failed"; }
  fi
  port_busy "$port" && die "port $port is taken by something else; remove $data.port to pick another"
  say "starting PostgreSQL on 127.0.0.1:$port"
  local log="$data.log"
  touch "$log"; [ "$(id -u)" = 0 ] && chown postgres: "$log"
  as_pg "$bin/pg_ctl" -D "$data" -l "$log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories='' -c max_connections=300" \
    start >/dev/null || { tail -20 "$log" >&2; die "PostgreSQL did not start"; }
  echo started > "$dev/pg.ours"
  local db
  for db in shipnotify shipnotify_test; do
    if ! psql -h 127.0.0.1 -p "$port" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1; then
      psql -h 127.0.0.1 -p "$port" -U postgres -qc "CREATE DATABASE $db" >/dev/null
    fi
  done
}

pg_down() {
  [ -f "$dev/pg.ours" ] || return 0
  local data; data=$(pg_datadir)
  if pg_running "$data"; then
    say "stopping PostgreSQL"
    as_pg "$(pg_bindir)/pg_ctl" -D "$data" -m fast -w stop >/dev/null || true
  fi
  rm -f "$dev/pg.ours"
}

# --- Temporal dev server -------------------------------------------------

temporal_healthy() {
  "$1" operator cluster health --address "127.0.0.1:$temporal_port" >/dev/null 2>&1
}

temporal_pid_alive() {
  [ -f "$temporal_dir/pid" ] && kill -0 "$(cat "$temporal_dir/pid")" 2>/dev/null
}

temporal_up() {
  local bin; bin=$(temporal_bin) || die "the Temporal CLI is not installed: run scripts/dev.sh install"
  if temporal_healthy "$bin"; then
    temporal_pid_alive || say "reusing the Temporal server already on :$temporal_port (not ours; it is left running)"
    return 0
  fi
  # Ours runs, but not on this port: a second one would share its database.
  temporal_pid_alive && die "the dev server this checkout started (pid $(cat "$temporal_dir/pid")) does not answer on :$temporal_port; scripts/dev.sh down stops it"
  mkdir -p "$temporal_dir"
  printf 'temporal=%s\nui=%s\ncodec=%s\n' "$temporal_port" "$ui_port" "$codec_port" > "$ports_file"
  local args=(server start-dev --ip 127.0.0.1 --port "$temporal_port" --ui-port "$ui_port"
    --db-filename "$temporal_dir/temporal.db"
    --sqlite-pragma journal_mode=wal --sqlite-pragma synchronous=normal
    # The SDK asks for an activity a workflow task schedules to come back in
    # the task's answer (eager dispatch), saving a matching round trip; the
    # server grants it only when this is on. A rate-capped worker asks for none.
    --dynamic-config-value system.enableActivityEagerExecution=true
    # A task queue's backlog is dispatched among tenants in turn (the
    # fairness key each reminder starts with is its tenant).
    --dynamic-config-value matching.enableFairness=true
    --log-level warn
    # `shipnotify codec-server` (started by the demo) decrypts payloads for the UI.
    --ui-codec-endpoint "http://localhost:$codec_port")
  local sa; for sa in "${search_attributes[@]}"; do args+=(--search-attribute "$sa"); done
  say "starting the Temporal dev server on 127.0.0.1:$temporal_port (Web UI http://localhost:$ui_port)"
  # Its own session, so a Ctrl-C meant for the demo does not reach it.
  setsid "$bin" "${args[@]}" >"$temporal_dir/server.log" 2>&1 < /dev/null &
  echo $! > "$temporal_dir/pid"
  local i
  for i in $(seq 1 120); do
    temporal_healthy "$bin" && return 0
    temporal_pid_alive || { tail -20 "$temporal_dir/server.log" >&2; die "the Temporal dev server exited"; }
    sleep 0.5
  done
  die "the Temporal dev server did not become healthy in 60 s"
}

temporal_down() {
  temporal_pid_alive || { rm -f "$temporal_dir/pid"; return 0; }
  local pid; pid=$(cat "$temporal_dir/pid")
  say "stopping the Temporal dev server"
  kill -TERM "$pid" 2>/dev/null || true
  local i
  for i in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$temporal_dir/pid"
}

# --- commands --------------------------------------------------------------

# The dev environment's payload key, made once: histories on the dev server
# stay readable across runs.
codec_keys() {
  local f="$dev/codec.keys"
  if [ ! -s "$f" ]; then
    (umask 077; printf 'dev-1:%s\n' "$(head -c 32 /dev/urandom | base64)" > "$f")
  fi
  echo "$f"
}

print_env() {
  local port; port=$(cat "$(pg_datadir).port")
  echo "SHIPNOTIFY_CODEC_KEYS_FILE=$(codec_keys)"
  echo "SHIPNOTIFY_DEV_CODEC_ADDR=127.0.0.1:$codec_port"
  echo "SHIPNOTIFY_DEV_UI_URL=http://localhost:$ui_port"
  echo "TEMPORAL_ADDRESS=127.0.0.1:$temporal_port"
  echo "TEMPORAL_NAMESPACE=default"
  echo "DATABASE_URL=postgres://postgres@127.0.0.1:$port/shipnotify?sslmode=disable"
  echo "TEST_DATABASE_URL=postgres://postgres@127.0.0.1:$port/shipnotify_test?sslmode=disable"
  echo "SHIPNOTIFY_DEV_DIR=$dev"
  echo "SHIPNOTIFY_DEV_PG_DATA=$(pg_datadir)"
  echo "SHIPNOTIFY_DEV_TEMPORAL_BIN=$(temporal_bin)"
  echo "SHIPNOTIFY_DEV_HELM_BIN=$(helm_bin || true)"
}

# scripts/engine.sh sources this file for its helpers; the commands below
# run only when it is executed.
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

mkdir -p "$dev"
case "${1:-}" in
  install)
    install_temporal
    install_postgres
    ;;
  install-deploy)
    install_helm
    install_promtool
    ;;
  up)
    install_temporal
    install_postgres
    temporal_up
    pg_up
    # The header's promise: a database ready for list and schedule.
    echo "dev: migrating the mirror (shipnotify migrate)" >&2
    (cd "$root" && set -a && eval "$(print_env)" && set +a && go run ./cmd/shipnotify migrate >&2)
    ;;
  down)
    temporal_down
    pg_down
    ;;
  env)
    print_env
    ;;
  run)
    shift
    [ "${1:-}" = "--" ] && shift
    [ $# -gt 0 ] || die "usage: scripts/dev.sh run -- CMD..."
    install_temporal
    install_postgres
    temporal_was_up=false; temporal_pid_alive && temporal_was_up=true
    bin=$(temporal_bin); temporal_healthy "$bin" && temporal_was_up=true
    pg_was_up=false; pg_running "$(pg_datadir)" && pg_was_up=true
    cleanup() {
      # Whatever happened to our output (a closed pipe), stop what we started.
      trap '' PIPE INT TERM
      $temporal_was_up || temporal_down
      $pg_was_up || pg_down
    }
    trap cleanup EXIT
    # Ctrl-C reaches the command (same process group); this shell waits for
    # it to finish and then cleans up.
    trap ':' INT TERM
    temporal_up
    pg_up
    set -a
    eval "$(print_env)"
    set +a
    status=0
    "$@" || status=$?
    exit $status
    ;;
  *)
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
