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
go test -count=1 -timeout 15m ./... "$@"
