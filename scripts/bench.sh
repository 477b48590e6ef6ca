#!/usr/bin/env bash
# make bench: the benchmark on a fresh, private Temporal dev server (its own
# SQLite file and ports, so earlier runs and the dev server do not weigh on
# it) and the dev PostgreSQL (a schema of its own, dropped after).
# Extra arguments go to `shipnotify bench`.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .dev/bin out
go build -o .dev/bin/shipnotify ./cmd/shipnotify
export SHIPNOTIFY_DEV_TEMPORAL_PORT=7243 SHIPNOTIFY_DEV_UI_PORT=8243 SHIPNOTIFY_DEV_TEMPORAL_DIR="$PWD/.dev/temporal-bench"
rm -rf "$SHIPNOTIFY_DEV_TEMPORAL_DIR"
exec scripts/dev.sh run -- .dev/bin/shipnotify bench --out out/bench.json "$@"
