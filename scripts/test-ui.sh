#!/usr/bin/env bash
# make test-ui: drive a real headless Chromium (Debian's chromium package)
# through the Temporal Web UI of the dev server, then through the approval
# console and the escalation email's links (console.TestConsoleInABrowser
# serves them and runs ui-test/console.mjs). CI runs it (.ci/run, after
# make test): it installs what it needs without asking, Debian's chromium
# (as root, through apt-get) and the pinned playwright-core and axe-core
# (npm ci in ui-test/). Screenshots land in out/ (git-ignored); the
# console's the docs show are copied to docs/.
#
#   scripts/test-ui.sh [webui|console]   one part only; both by default
set -euo pipefail
part=${1:-all}
cd "$(dirname "$0")/.."
root=$PWD

if ! command -v chromium >/dev/null; then
  [ "$(id -u)" = 0 ] || { echo "install Debian's chromium package first (apt-get install chromium, as root)" >&2; exit 1; }
  echo "installing Chromium from Debian's packages" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2
fi
command -v npm >/dev/null || { echo "test-ui needs node and npm (Debian's nodejs and npm packages)" >&2; exit 1; }
(cd ui-test && npm ci --no-audit --no-fund --silent </dev/null)
go build -o .dev/bin/shipnotify ./cmd/shipnotify

exec scripts/dev.sh run -- env PART="$part" bash -c '
  set -euo pipefail
  console() {
    SHIPNOTIFY_BROWSER_TEST="'"$root"'/ui-test/console.mjs" OUT_DIR="'"$root"'/out" \
      go test -count=1 -run "^TestConsoleInABrowser$" -v ./internal/console/
    # The console'"'"'s screenshots the docs show.
    for s in list list-long list-390 reminder-390 overview overview-390; do cp "'"$root"'/out/console-$s.png" "'"$root"'/docs/"; done
  }
  if [ "$PART" = console ]; then
    console
    exit
  fi
  shipment="SHP-UI-$(date +%s)"
  # To the minute, as the summary and current details print it.
  due_epoch=$(( ($(date +%s) + 30*86400) / 60 * 60 ))
  due=$(date -u -d "@$due_epoch" +%Y-%m-%dT%H:%M:%SZ)
  due_text=$(date -u -d "@$due_epoch" "+%Y-%m-%d %H:%M UTC")
  # A task queue of its own: a worker of another checkout (other keys) never takes its tasks.
  queue="ui-test-$shipment"
  .dev/bin/shipnotify migrate >/dev/null
  # A worker runs the workflow, so it sets its current details and answers
  # the Web UI'"'"'s metadata query. Nothing is due for 30 days: no mail goes out.
  SHIPNOTIFY_TASK_QUEUE=$queue SHIPNOTIFY_METRICS_ADDR=off SENDGRID_API_KEY=ui-test-unused \
    SENDGRID_BASE_URL=http://127.0.0.1:9 .dev/bin/shipnotify worker >.dev/ui-worker.log 2>&1 &
  worker=$!
  trap "kill $worker 2>/dev/null" EXIT
  # The UI decodes payloads through the codec server (the dev server points it there).
  if (exec 3<>"/dev/tcp/${SHIPNOTIFY_DEV_CODEC_ADDR/://}") 2>/dev/null; then
    echo "test-ui: $SHIPNOTIFY_DEV_CODEC_ADDR is taken (another codec server, perhaps with other keys); stop it first" >&2
    exit 1
  fi
  # The Web UI is the dev server'"'"'s, on whatever port it has: its origin may call.
  .dev/bin/shipnotify codec-server --insecure-loopback --listen "$SHIPNOTIFY_DEV_CODEC_ADDR" \
    --origin "$SHIPNOTIFY_DEV_UI_URL" 2>/dev/null &
  codec=$!
  trap "kill $codec $worker 2>/dev/null" EXIT
  printf "%s" "{\"shipment_id\":\"$shipment\",\"update_id\":\"window-1\",\"kind\":\"delivery_window\",
    \"message\":{\"subject\":\"Dock 4 slot for Ms Privacy\",\"text\":\"Gate code 4711 at the ramp.\"},
    \"subscribers\":[{\"id\":\"ops\",\"channel\":\"email\",\"email\":\"ops@shipper.example\",\"due_at\":\"$due\"}]}" \
    | SHIPNOTIFY_TASK_QUEUE=$queue SHIPNOTIFY_DELAYED_START=true .dev/bin/shipnotify schedule >/dev/null
  workflow="reminder/$shipment/window-1/ops"
  # It starts in its start delay (SHIPNOTIFY_DELAYED_START), which its
  # details say; a reschedule a day later wakes it, so it sleeps on a timer,
  # as every reminder does by default, and shows what it waits for as
  # current details.
  moved_epoch=$(( due_epoch + 86400 ))
  SHIPNOTIFY_TASK_QUEUE=$queue .dev/bin/shipnotify reschedule --reminder "$shipment/window-1/ops" \
    --due-at "$(date -u -d "@$moved_epoch" +%Y-%m-%dT%H:%M:%SZ)" >/dev/null
  status=0
  SHIPMENT_ID="$shipment" WORKFLOW_ID="$workflow" DUE_TEXT="$due_text" OUT_DIR="'"$root"'/out" \
    MOVED_DUE_TEXT="$(date -u -d "@$moved_epoch" "+%Y-%m-%d %H:%M UTC")" \
    PERSONAL="ops@shipper.example|Ms Privacy|Gate code" \
    node ui-test/webui.mjs || status=$?
  "$SHIPNOTIFY_DEV_TEMPORAL_BIN" workflow terminate --address "$TEMPORAL_ADDRESS" -w "$workflow" --reason "ui test over" >/dev/null || true
  [ $status = 0 ] && [ "$PART" = all ] || exit $status
  # The approval console and the escalation links, served by the test.
  console
'
