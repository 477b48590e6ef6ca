package cli

// The mirror connections each long-running process keeps: its pgx pool's
// MaxConns, the most it ever opens. The Helm chart's connection budget
// (deploy/helm) adds them up against PostgreSQL's max_connections; deploy's
// tests hold the chart's figures to these.
const (
	// ServePoolSize is serve's pool: requests in flight, the relay, the
	// escalator and the Event Webhook each hold one for a statement at a
	// time.
	ServePoolSize = 16
	// MigratePoolSize is migrate's pool: one migration at a time, and its
	// lock.
	MigratePoolSize = 2
	// workerPoolSpare is what a worker keeps beyond one connection per
	// activity slot: the gauges' refresh and the readiness check.
	workerPoolSpare = 4
)

// WorkerPoolSize is a worker's pool for maxActivities activities in
// flight: each may hold a connection, and the spare ones serve the rest.
func WorkerPoolSize(maxActivities int) int32 {
	return int32(maxActivities) + workerPoolSpare
}
