#!/usr/bin/env bash
# Screenshots of shipnotify's own letters as the mail sink's mailbox page
# shows them, in headless Chromium (Debian's chromium package), into docs/:
# the mailbox with a German reminder and an escalation, and the reminder's
# HTML part on a phone in dark mode. No server is needed.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v chromium >/dev/null || { echo "install Debian's chromium package first" >&2; exit 1; }
mkdir -p .dev/bin
go build -o .dev/bin/mailshots ./internal/tools/mailshots
out=$(mktemp)
.dev/bin/mailshots >"$out" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -f "$out"' EXIT
for _ in $(seq 100); do [ -s "$out" ] && break; sleep 0.1; done
read -r url reminder escalation <"$out"
sandbox=()
[ "$(id -u)" = 0 ] && sandbox=(--no-sandbox)   # Chromium refuses to sandbox as root
shot() { chromium --headless "${sandbox[@]}" --disable-gpu --hide-scrollbars "$@" 2>/dev/null; }
shot --window-size=760,1500 --screenshot=docs/mail-mailbox.png "$url/mailbox"
shot --window-size=390,760 --force-dark-mode --screenshot=docs/mail-reminder-phone-dark.png "$url/mailbox/$reminder/html"
shot --window-size=390,900 --force-dark-mode --screenshot=docs/mail-escalation-phone-dark.png "$url/mailbox/$escalation/html"
echo "docs/mail-mailbox.png docs/mail-reminder-phone-dark.png docs/mail-escalation-phone-dark.png"
