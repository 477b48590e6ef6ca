// Package engine holds the end-to-end run on the Temporal server users
// deploy (temporalio/server with PostgreSQL persistence and SQL visibility),
// which `make test-engine` starts: two worker processes, one killed mid-run.
// Its test runs only when SHIPNOTIFY_ENGINE_TEST=1 says the target is that
// server, and then fails, never skips, when anything is missing.
package engine
