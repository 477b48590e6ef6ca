#!/usr/bin/env bash
# The OpenAPI document's lint, run by make test: Redocly's recommended
# rules and Spectral's spectral:oas, both from npm at the versions
# lint/openapi/package-lock.json pins. A warning fails it as an error does.
set -euo pipefail
cd "$(dirname "$0")/.."
doc=internal/api/openapi.json
tools=lint/openapi
stamp=$tools/node_modules/.installed-from-lock
if ! cmp -s "$tools/package-lock.json" "$stamp" 2>/dev/null; then
  command -v npm >/dev/null || { echo "lint-openapi: npm is needed (Debian's npm package)" >&2; exit 1; }
  echo "lint-openapi: installing @redocly/cli and @stoplight/spectral-cli from npm (once, under a minute)" >&2
  (cd "$tools" && npm ci --no-audit --no-fund --silent)
  cp "$tools/package-lock.json" "$stamp"
fi
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
redocly() { "$tools/node_modules/.bin/redocly" lint --config "$tools/redocly.yaml" "$@" "$doc" 2>/dev/null; }
totals=$(redocly --format json | node -e '
  let s = ""; process.stdin.on("data", d => s += d).on("end", () => {
    const t = JSON.parse(s).totals; console.log(`${t.errors} ${t.warnings}`) })') || totals="? ?"
if [ "$totals" != "0 0" ]; then
  redocly --format stylish || true
  echo "lint-openapi: redocly (recommended) found problems (errors, warnings: $totals)" >&2
  exit 1
fi
"$tools/node_modules/.bin/spectral" lint --quiet -r "$tools/.spectral.json" --fail-severity=warn "$doc"
echo "lint-openapi: $doc is clean under redocly (recommended) and spectral (spectral:oas)"
