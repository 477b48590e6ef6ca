package activities

import (
	"context"

	"github.com/shipnotify/shipnotify/mirror"
)

// The steps of Notify, each run alone as an activity (they need the
// attempt's activity context) by the tests of the steps.

// ClaimStep begins an attempt of in and runs its claim step.
func (a *Activities) ClaimStep(ctx context.Context, in NotifyInput) (mirror.ClaimVerdict, error) {
	claim, _, err := a.claimKey(ctx, a.beginNotify(ctx, in))
	return claim.Verdict, err
}

// ClearToSendStep claims in's key on a context no cancel reaches, as an
// attempt that got its claim before a cancel would, then runs the step
// between the claim and the call.
func (a *Activities) ClearToSendStep(ctx context.Context, in NotifyInput) error {
	n := a.beginNotify(ctx, in)
	if _, _, err := a.claimKey(context.WithoutCancel(ctx), n); err != nil {
		return err
	}
	return a.clearToSend(ctx, n)
}

// RecordAcceptedStep claims in's key on a context no cancel reaches, then
// records the provider's acceptance under providerID.
func (a *Activities) RecordAcceptedStep(ctx context.Context, in NotifyInput, providerID string) error {
	n := a.beginNotify(ctx, in)
	claim, _, err := a.claimKey(context.WithoutCancel(ctx), n)
	if err != nil {
		return err
	}
	return a.recordAccepted(ctx, n, n.target(claim), providerID, claim.Attempts)
}
