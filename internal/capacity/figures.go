package capacity

// The figures the fleet model starts from, each measured on this project's
// machine (2 cores) by a run whose report is kept in docs/. The test
// TestDefaultFiguresAreTheReports recomputes every one from its report, so
// a figure cannot drift from the run it names. Pass a flag to `shipnotify
// capacity --fleet` to use your own.

const (
	engineReport  = "docs/bench-engine-2026-12-02-send-safety.json"
	devReport     = "docs/bench-2026-12-01-send-safety-burst.json"
	horizontalRun = "docs/bench-horizontal-2026-12-03.json"
)

// DefaultFigures are the measured figures in docs/.
var DefaultFigures = Figures{
	ActionsPerReminder: Figure{4, engineReport + ": full path, bursts of 500, median of 5 rounds"},
	EventsPerReminder:  Figure{19, engineReport + ": full path, bursts of 500, median of 5 rounds"},
	EngineCPU:          Figure{0.0894, engineReport + ": Temporal server CPU / reminders, full path, bursts of 500, median of 5 rounds"},
	PersistenceCPU: Figure{0.0626, engineReport + ": its PostgreSQL's CPU per reminder (66.4 ms, median of 5 bursts) less the mirror's (" +
		devReport + ": 3.8 ms)"},
	WorkerCPU:    Figure{0.0156, engineReport + ": worker CPU / reminders, full path, bursts of 500, median of 5 rounds"},
	MirrorCPU:    Figure{0.0038, devReport + ": PostgreSQL CPU per reminder on the dev server, where it holds the mirror alone, median of 5 bursts"},
	MeasuredRate: Figure{24.3, engineReport + ": the full path's burst drain rate, median of 5 rounds, on 2 cores shared by everything"},
	// Measured by the horizontal run (make bench-horizontal): medians over
	// its 12 compared runs without a kill (fleet_figures), and the mirror
	// its 51,000 reminders left (mirror).
	PersistenceWrites: Figure{9.13, horizontalRun + ": the server's own creations and updates of workflows per reminder (its /metrics)"},
	PersistenceLatency: Figure{0.0336, horizontalRun + ": one such write's mean latency (its /metrics), on this machine's PostgreSQL under a " +
		"saturated engine"},
	MirrorRows:     Figure{13.04, horizontalRun + ": every growing table's rows over the reminders, after 17 runs"},
	MirrorBytes:    Figure{7935, horizontalRun + ": every growing table's bytes with indexes over the reminders, unvacuumed"},
	ProviderEvents: Figure{2, horizontalRun + ": SendGrid events (processed, delivered) serve kept per reminder"},
	SendSeconds: Figure{1.283, horizontalRun + ": a first-attempt send's claim to its record (the provider's 220 ms median, " +
		"its 6 s tail, the heartbeat and the record on a saturated engine)"},
}
