// Package worker assembles a Temporal worker that runs shipnotify's
// workflows and activities on one task queue.
package worker

import (
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/budget"
	"github.com/shipnotify/shipnotify/workflows"
)

// Options tune a worker; zero values take the SDK's defaults.
type Options struct {
	// MaxConcurrentActivities bounds notify activities in flight; size the
	// mirror's connection pool to it.
	MaxConcurrentActivities int
	// SendsPerSecond is the provider's rate cap, held on the task queue
	// (its activity rate, across all workers; the mirror's send slots,
	// activities.Activities.SendsPerSecond, hold it exactly); 0 is unlimited.
	SendsPerSecond float64
	// MaxConcurrentWorkflowTasks, MaxConcurrentLocalActivities and the
	// pollers are the SDK's own knobs, named here so the benchmark can pin
	// them to the same values on every worker it compares. Pollers left at
	// 0 scale themselves (the SDK's poller autoscaling, which the server
	// steers by its backlog).
	MaxConcurrentWorkflowTasks   int
	MaxConcurrentLocalActivities int
	WorkflowTaskPollers          int
	ActivityTaskPollers          int
	// Versions pins the version new runs record for these change ids (the
	// SDK's preferred version), so the benchmark and the tests can walk a
	// path reminders of an earlier release take; empty records the latest.
	Versions map[string]workflow.Version
}

// DefaultCacheSize is how many running reminders a worker keeps in memory
// (about 35 KB each). A reminder mostly sleeps for days, so caching more
// buys little: one that was evicted replays its short history when its
// timer fires.
const DefaultCacheSize = 2000

// SetCacheSize bounds the workflows every worker of this process keeps in
// memory; call it once, before creating workers (the SDK's cache is shared
// by the process).
func SetCacheSize(n int) {
	if n > 0 {
		sdkworker.SetStickyWorkflowCacheSize(n)
	}
}

// StopTimeout is how long a stopping worker lets its activities finish
// before it cancels them: longer than a notify attempt (30 s) and the record
// that may follow it (10 s), so a deploy never cuts a provider call short
// and turns an accepted send into a second one. Give the process a grace
// period above it (compose stop_grace_period, Kubernetes
// terminationGracePeriodSeconds): 60 s.
const StopTimeout = budget.WorkerStop

// HeartbeatThrottle is how long the SDK may hold an activity's heartbeat
// before sending it. The notify activity heartbeats the provider's message
// id the moment a send is accepted; it must reach Temporal within about a
// second, not the SDK's default 30 s, so a retry finds it.
const HeartbeatThrottle = budget.HeartbeatThrottle

// New returns a worker on taskQueue with every workflow and activity
// registered. Start it with Run or Start.
func New(c client.Client, taskQueue string, acts *activities.Activities, o Options) sdkworker.Worker {
	w := sdkworker.New(c, taskQueue, SDKOptions(o))
	Register(w, acts)
	return w
}

// SDKOptions are the SDK worker options a shipnotify worker runs with; the
// benchmark's baseline workers take the same, so only the workflow differs.
func SDKOptions(o Options) sdkworker.Options {
	opts := sdkworker.Options{
		MaxConcurrentActivityExecutionSize:      o.MaxConcurrentActivities,
		TaskQueueActivitiesPerSecond:            o.SendsPerSecond,
		MaxConcurrentWorkflowTaskExecutionSize:  o.MaxConcurrentWorkflowTasks,
		MaxConcurrentLocalActivityExecutionSize: o.MaxConcurrentLocalActivities,
		MaxConcurrentWorkflowTaskPollers:        o.WorkflowTaskPollers,
		MaxConcurrentActivityTaskPollers:        o.ActivityTaskPollers,
		WorkerStopTimeout:                       StopTimeout,
		DefaultHeartbeatThrottleInterval:        HeartbeatThrottle,
		MaxHeartbeatThrottleInterval:            HeartbeatThrottle,
	}
	// A fixed count of pollers either sits in long polls while a burst
	// waits, or is too many at rest; the server's scaling decisions follow
	// the backlog (it needs Temporal 1.28 or later).
	if o.WorkflowTaskPollers == 0 {
		opts.WorkflowTaskPollerBehavior = sdkworker.NewPollerBehaviorAutoscaling(sdkworker.PollerBehaviorAutoscalingOptions{})
	}
	if o.ActivityTaskPollers == 0 {
		opts.ActivityTaskPollerBehavior = sdkworker.NewPollerBehaviorAutoscaling(sdkworker.PollerBehaviorAutoscalingOptions{})
	}
	if len(o.Versions) > 0 {
		opts.PreferredVersionProvider = func(in sdkworker.PreferredVersionProviderInput) *sdkworker.VersionPreference {
			if v, ok := o.Versions[in.ChangeID]; ok {
				return &sdkworker.VersionPreference{Version: v}
			}
			return nil
		}
	}
	return opts
}

// Register adds shipnotify's workflows and activities to a registry; tests
// use it too, so registration has one home.
func Register(r sdkworker.Registry, acts *activities.Activities) {
	RegisterWorkflows(r)
	r.RegisterActivityWithOptions(acts, activity.RegisterOptions{})
}

// RegisterWorkflows adds the workflows alone, for the history replayer.
func RegisterWorkflows(r sdkworker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(workflows.ReminderWorkflow, workflow.RegisterOptions{Name: workflows.ReminderWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.CancellationNoticeWorkflow, workflow.RegisterOptions{Name: workflows.CancellationNoticeWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.DeliveryEscalationWorkflow, workflow.RegisterOptions{Name: workflows.DeliveryEscalationWorkflowName})
}
