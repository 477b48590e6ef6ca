#!/usr/bin/env bash
# What `make test` runs once the real parts are up: formatting, vet,
# workflowcheck (workflow code must be deterministic), then every test.
set -euo pipefail
cd "$(dirname "$0")/.."

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.dev/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change: $unformatted" >&2
  exit 1
fi
echo "== go vet"
go vet ./...
echo "== the OpenAPI document's lint"
scripts/lint-openapi.sh
echo "== workflowcheck"
go tool workflowcheck ./...
echo "== go test"
# The integration tests spend their time waiting at production's timings
# (a 45 s lease, a worker frozen for 35 s, a 6 s provider), not computing:
# four at once per package, not go test's one per core, so the suite's wall
# time is not the sum of its waits on a two-core machine.
go test -count=1 -timeout 15m -parallel 4 ./... "$@"
