# The two commands: `make demo` and `make test`. Everything they need (the
# pinned Temporal CLI, PostgreSQL) is installed by scripts/dev.sh if missing.
SHELL := bash
BIN := .dev/bin/shipnotify
BENCH_BIN := .dev/bin/shipnotify-bench

.PHONY: demo test test-engine test-ui soak bench bench-engine bench-events bench-digest down up build

## demo: run the product end to end on its embedded defaults; Ctrl-C stops it. DEMO_ARGS passes flags
## (shipnotify demo --help); the SHIPNOTIFY_DEV_* ports of scripts/dev.sh are honoured
demo: build
	@scripts/dev.sh run -- $(BIN) demo $(DEMO_ARGS)

## test: every test, against a real Temporal dev server and PostgreSQL (installs what they need first:
## the Temporal CLI and PostgreSQL, and for the deploy tests Helm and promtool)
test:
	@scripts/dev.sh install
	@scripts/dev.sh install-deploy
	@scripts/dev.sh run -- scripts/test.sh

## test-engine: the packages that drive Temporal (ENGINE_SUITE=all: every package), then two workers (one
## SIGKILLed) end to end, on the Temporal server compose deploys (PostgreSQL persistence, SQL visibility);
## builds the server once per machine (about 6 min)
test-engine:
	@scripts/engine.sh test

## soak: a seeded random workload (CLI and HTTP API, two tenants) with random faults (workers, the dev server,
## PostgreSQL, serve killed or frozen; the mail API, webhooks and trackers failing, late or slow; the rate cap
## turned on), then an invariant check from outside; SOAK_SEED and SOAK_DURATION replay or lengthen it
## (default seed 1 for 2m, as CI runs it); summary in out/soak-<seed>.txt
SOAK_SEED ?= 1
SOAK_DURATION ?= 2m
soak:
	@scripts/dev.sh run -- env SHIPNOTIFY_SOAK_SEED=$(SOAK_SEED) SHIPNOTIFY_SOAK_DURATION=$(SOAK_DURATION) \
		go test -tags soak -count=1 -timeout 90m -v -run TestSoak ./internal/tools/soak

## test-ui: headless Chromium through the Temporal Web UI and the approval console (CI runs it after make test; installs
## Debian's chromium and the pinned npm packages); screenshots in out/ and docs/console-*.png
test-ui:
	@scripts/test-ui.sh

## bench: the full reminder path, and full-delayed (started with Temporal's start delay instead of a timer), against
## two bare baselines, 5 alternating pairs, a fresh dev server per workload, burst and catch-up against a realistic and
## an instant mail provider, a cold burst (workers restarted between scheduling and the due instant), then a slow
## provider and a provider outage (about 2.5 hours; the table, the per-reminder events, workflow tasks and actions and
## the targets at the end, out/bench.json kept); BENCH_ARGS passes flags
bench:
	@scripts/bench.sh $(BENCH_ARGS)

## bench-digest: forty subscribers of one inbox due together, with and without a digest, with an instant provider and
## one that answers in 6 s: provider calls, billable engine actions, activity attempts, history events (about 5 minutes)
bench-digest:
	@scripts/dev.sh run -- go test -run '^$$' -bench FortySubscribersOfOneInbox -benchtime 1x ./internal/tools/bench

## bench-engine: the same on the PostgreSQL-backed server make test-engine builds (about 3 h; out/bench-engine.json)
bench-engine:
	@scripts/bench.sh --engine $(BENCH_ARGS)

## bench-horizontal: issue 24 on the PostgreSQL-backed server: the product's own workers scaled 1, 2, 3 beside two serve
## replicas, a burst and a catch-up of 3,000 each, 2 rounds, and one worker and one replica SIGKILLed mid-run, each run
## checked from outside (about 70 minutes; out/bench-horizontal.json and .txt); BENCH_ARGS passes flags (shipnotify-bench horizontal --help)
.PHONY: bench-horizontal
bench-horizontal:
	@scripts/bench.sh --engine --horizontal $(BENCH_ARGS)

## bench-fairness: issue 38: one tenant (acme) posts 20,000 reminders in updates of 500 as fast as the API lets it, and
## moves 8 windows at once, while another (globex) posts and moves one reminder at a time; globex's answer times and
## lateness alone for a minute and then beside acme, in one run on a fresh dev server, each tenant checked from outside
## (out/bench-fairness.json and .txt); BENCH_ENGINE=1 runs it on the PostgreSQL-backed server make test-engine builds
## (out/bench-engine-fairness.*); BENCH_ARGS passes flags (shipnotify-bench fairness --help)
.PHONY: bench-fairness
bench-fairness:
	@scripts/bench.sh $(if $(BENCH_ENGINE),--engine) --fairness $(BENCH_ARGS)

## bench-events: the SendGrid Event Webhook's ingestion rate (issue 13) alone: signed batches of 1,000 events
## through the handler into PostgreSQL, at 1 and 4 in flight, 5 runs each (about a minute; out/bench-events.json)
bench-events: build
	@scripts/dev.sh run -- $(BENCH_BIN) events --out out/bench-events.json $(BENCH_ARGS)

## up / down: keep the dev server and PostgreSQL running between commands
up:
	@scripts/dev.sh up
	@scripts/dev.sh env
down:
	@scripts/dev.sh down

build:
	@mkdir -p .dev/bin
	go build -buildvcs=auto -o $(BIN) ./cmd/shipnotify
	go build -buildvcs=auto -o $(BENCH_BIN) ./cmd/shipnotify-bench
