package bench

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fairnessRun is a run worked by hand: the noisy tenant from t0+60s to
// t0+120s; the quiet tenant's schedules answer in 100 ms alone and 300 ms
// beside it, its moves in 50 and 500 ms, its reminders sent 1 s late alone
// and 4 s late beside it.
func fairnessRun() FairnessReport {
	rep := FairnessReport{NoisyStart: t0.Add(time.Minute), NoisyDone: t0.Add(2 * time.Minute)}
	for s := 0; s < 120; s += 10 {
		sent := t0.Add(time.Duration(s) * time.Second)
		took, move, late := 100*time.Millisecond, 50*time.Millisecond, time.Second
		if s >= 60 {
			took, move, late = 300*time.Millisecond, 500*time.Millisecond, 4*time.Second
		}
		rep.Quiet = append(rep.Quiet,
			QuietSample{Op: OpSchedule, At: sent, Took: took, Statuses: []int{http.StatusCreated}},
			QuietSample{Op: OpMove, At: sent, Took: move, Statuses: []int{http.StatusOK}})
		due := sent.Add(15 * time.Second)
		switch {
		case due.Before(rep.NoisyStart):
			late = time.Second
		case due.Before(rep.NoisyDone):
			late = 4 * time.Second
		default:
			late = 2 * time.Second
		}
		rep.addQuietReminder(due, late)
	}
	rep.Quiet = append(rep.Quiet, QuietSample{Op: OpSchedule, At: t0.Add(70 * time.Second), Took: 300 * time.Millisecond,
		Statuses: []int{http.StatusTooManyRequests, http.StatusCreated}})
	noisy := FairnessTenant{}
	for i := range 10 {
		due := rep.NoisyStart.Add(20*time.Second + time.Duration(i)*time.Second)
		noisy.Reminders = append(noisy.Reminders, ReminderTimes{Due: due, Sent: due.Add(time.Duration(i) * time.Second), Started: true})
	}
	noisy.Reminders = append(noisy.Reminders, ReminderTimes{Due: rep.NoisyStart.Add(time.Minute)})
	rep.Tenants[NoisyTenant] = noisy
	return rep
}

func (rep *FairnessReport) addQuietReminder(due time.Time, late time.Duration) {
	if rep.Tenants == nil {
		rep.Tenants = map[string]FairnessTenant{}
	}
	q := rep.Tenants[QuietTenant]
	q.Reminders = append(q.Reminders, ReminderTimes{Due: due, Sent: due.Add(late), Started: true})
	rep.Tenants[QuietTenant] = q
}

// Requests count in the phase they were sent in and reminders in the
// phase they were due in, so a reminder posted alone but due beside the
// noisy tenant counts as beside it; the ratios are beside over alone.
func TestTheQuietTenantIsMeasuredByPhase(t *testing.T) {
	t.Parallel()
	rep := fairnessRun()
	rep.summarise()
	require.Len(t, rep.Phases, 3)
	alone, beside, after := rep.Phases[0], rep.Phases[1], rep.Phases[2]
	require.Equal(t, PhaseBaseline, alone.Name)
	require.Equal(t, 6, alone.Schedules, "sent at 0..50 s")
	require.Equal(t, 7, beside.Schedules, "sent at 60..110 s, and the one retried")
	require.Equal(t, 0, after.Schedules)
	require.Equal(t, 1, beside.Retried)
	require.Equal(t, 100*time.Millisecond, alone.Schedule.P99)
	require.Equal(t, 300*time.Millisecond, beside.Schedule.P50)
	require.Equal(t, 500*time.Millisecond, beside.Move.Max)

	require.Equal(t, 5, alone.Reminders, "due at 15..55 s")
	require.Equal(t, 6, beside.Reminders, "due at 65..115 s")
	require.Equal(t, 1, after.Reminders, "due at 125 s")
	require.Equal(t, time.Second, alone.Lateness.Max)
	require.Equal(t, 4*time.Second, beside.Lateness.P50)
	require.Equal(t, 2*time.Second, after.Lateness.P50)

	require.Equal(t, []FairnessRatio{{"schedule", 3, 3}, {"move", 10, 10}, {"lateness", 4, 4}}, rep.Ratios)
}

// The noisy tenant's lateness is over what was sent, its drain is from
// the last due of those sent to the last sent, and a reminder whose workflow never
// started is counted, whichever tenant's.
func TestTheNoisyTenantsDrainIsFromItsLastDue(t *testing.T) {
	t.Parallel()
	rep := fairnessRun()
	rep.summarise()
	require.Equal(t, 9*time.Second, rep.Noisy.Lateness.Max)
	require.Equal(t, 4*time.Second, rep.Noisy.Lateness.P50)
	// The last due of those sent at +29 s, the last sent at +38 s; the
	// unsent one is the check's to report.
	require.Equal(t, 9*time.Second, rep.Noisy.Drain)
	require.Equal(t, 1, rep.Unstarted)
}

// Without a figure in either phase there is no ratio, rather than a
// ratio of nothing.
func TestARatioNeedsBothPhases(t *testing.T) {
	t.Parallel()
	rep := FairnessReport{NoisyStart: t0, NoisyDone: t0.Add(time.Minute), Quiet: []QuietSample{
		{Op: OpSchedule, At: t0.Add(time.Second), Took: time.Second},
	}}
	rep.summarise()
	require.Equal(t, FairnessRatio{Figure: "schedule"}, rep.Ratios[0])
	var b bytes.Buffer
	require.NoError(t, WriteFairnessTable(&b, rep))
	require.Contains(t, b.String(), "schedule p50 -, p99 -")
	require.Contains(t, b.String(), "check, acme: not made")
}

// The noisy tenant's updates are due evenly over the spread, the first
// at the lead, so its delivery overlaps the quiet tenant's work.
func TestNoisyUpdatesAreDueSpreadOverTheWindow(t *testing.T) {
	t.Parallel()
	lead, spread := 20*time.Second, time.Minute
	require.Equal(t, t0.Add(lead), NoisyDue(t0, lead, spread, 0, 5))
	require.Equal(t, t0.Add(lead+30*time.Second), NoisyDue(t0, lead, spread, 2, 5))
	require.Equal(t, t0.Add(lead+spread), NoisyDue(t0, lead, spread, 4, 5))
	require.Equal(t, t0.Add(lead), NoisyDue(t0, lead, spread, 0, 1), "one update: at the lead")
}

// The noisy moves take the updates due last, which are still to come
// when the moves go out.
func TestTheNoisyMovesTakeTheUpdatesDueLast(t *testing.T) {
	t.Parallel()
	var us []*postedUpdate
	for _, s := range []int{3, 9, 1, 7, 5} {
		us = append(us, &postedUpdate{shipment: string(rune('a' + s)), window: t0.Add(time.Duration(s) * time.Second)})
	}
	got := latestDue(us, 2)
	require.Equal(t, []*postedUpdate{us[1], us[3]}, got)
	require.Len(t, latestDue(us, 8), 5, "no more than there are")
}

// Retry-After is whole seconds, as the API sends it; anything else
// waits the fallback.
func TestRetryAfterIsWholeSeconds(t *testing.T) {
	t.Parallel()
	require.Equal(t, 3*time.Second, RetryAfter("3", time.Second))
	require.Equal(t, time.Duration(0), RetryAfter("0", time.Second))
	for _, h := range []string{"", "-1", "1.5", "Wed, 21 Oct 2026 07:28:00 GMT"} {
		require.Equal(t, time.Second, RetryAfter(h, time.Second), "%q", h)
	}
}
