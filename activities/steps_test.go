package activities_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/shipnotify/shipnotify/reminder"
)

// step runs one of Notify's steps alone (step is one of the
// activities.*Step methods, args its arguments) in a fresh activity
// environment whose worker context is ctx, as an attempt would run it.
func (f *fixture) step(ctx context.Context, step any, args ...any) error {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(sdkworker.Options{BackgroundActivityContext: ctx})
	env.RegisterActivity(step)
	_, err := env.ExecuteActivity(step, args...)
	return err
}

// The claim step claims the key for the attempt, sending nothing; a
// reminder the mirror does not have fails for good, and claims nothing.
func TestTheClaimStepHoldsTheKeyForTheAttempt(t *testing.T) {
	t.Parallel()
	f := setup(t)
	in := f.schedule(t, reminder.Email)
	require.NoError(t, f.step(context.Background(), f.acts.ClaimStep, in))
	require.Equal(t, "sending", f.status(in.Key()))
	var owner string
	require.NoError(t, f.db.Pool.QueryRow(context.Background(),
		`SELECT claimed_by FROM deliveries WHERE delivery_key = $1`, in.Key()).Scan(&owner))
	require.Contains(t, owner, "#1", "the claim names the attempt that holds it")
	require.Zero(t, f.mail.Requests())

	missing := in
	missing.ReminderID = "rem-not-in-the-mirror"
	err := f.step(context.Background(), f.acts.ClaimStep, missing)
	require.Equal(t, "ReminderNotFound", errType(err))
	require.Empty(t, f.status(missing.Key()), "nothing was claimed")
}

// Between the claim and the call: with no cap and no cancel the call may
// go and the claim is kept for it; a cancel that reached the attempt by
// then stops it, and the claim is released (nothing was sent), so the
// next attempt takes the key at once.
func TestClearToSendReleasesTheClaimWhenItStopsTheSend(t *testing.T) {
	t.Parallel()
	f := setup(t)
	in := f.schedule(t, reminder.Email)
	require.NoError(t, f.step(context.Background(), f.acts.ClearToSendStep, in))
	require.Equal(t, "sending", f.status(in.Key()), "clear to send: the claim is kept for the call")

	other := f.schedule(t, reminder.Email)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	err := f.step(cancelled, f.acts.ClearToSendStep, other)
	require.ErrorContains(t, err, "canceled")
	require.Equal(t, "released", f.status(other.Key()), "stopped before the call: the claim is given up")
	require.Zero(t, f.mail.Requests())
}

// The record of an accepted send outlives the attempt's cancellation: a
// send the provider took is recorded, with its event, even when the
// attempt was cancelled while the provider answered.
func TestTheRecordOfAnAcceptedSendOutlivesACancel(t *testing.T) {
	t.Parallel()
	f := setup(t)
	in := f.schedule(t, reminder.Email)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, f.step(cancelled, f.acts.RecordAcceptedStep, in, "msg-accepted"))
	d := f.delivery(t, in.Key())
	require.Equal(t, "sent", d.Status)
	require.Equal(t, "msg-accepted", d.ProviderMessageID)
	require.Contains(t, f.eventTypes(t, in.ReminderID), "sent")
}
