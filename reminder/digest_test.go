package reminder_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/sendwindow"
)

// A member goes out at the next boundary of its interval, or at once on
// one; members due within one interval meet at the same boundary.
func TestADigestGoesOutAtItsIntervalsNextBoundary(t *testing.T) {
	t.Parallel()
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return v
	}
	for _, tc := range []struct {
		due, want string
		every     time.Duration
	}{
		{"2026-12-01T08:00:00Z", "2026-12-01T08:00:00Z", 30 * time.Minute},
		{"2026-12-01T08:00:01Z", "2026-12-01T08:30:00Z", 30 * time.Minute},
		{"2026-12-01T08:29:59Z", "2026-12-01T08:30:00Z", 30 * time.Minute},
		{"2026-12-01T23:59:00Z", "2026-12-02T00:00:00Z", 24 * time.Hour},
		{"2026-12-01T08:07:00Z", "2026-12-01T08:07:00Z", 0},
	} {
		require.Equal(t, at(tc.want), reminder.DigestAt(at(tc.due), tc.every), "%s every %s", tc.due, tc.every)
	}
	// A window's opening is where the digest's interval starts counting.
	w := &reminder.SendWindow{Window: sendwindow.Window{Days: sendwindow.Weekdays, From: 8 * 60, To: 18 * 60}, TimeZone: "UTC"}
	require.Equal(t, at("2026-12-01T08:00:00Z"), reminder.GoesOutAt(at("2026-12-01T03:00:00Z"), w, 30*time.Minute))
	require.Equal(t, at("2026-12-01T09:00:00Z"), reminder.GoesOutAt(at("2026-12-01T08:40:00Z"), w, 30*time.Minute))
}

// The digest's key is its members', in any order, and no reminder's.
func TestADigestsKeyIsItsMembers(t *testing.T) {
	t.Parallel()
	k := reminder.DigestKey([]string{"b", "a", "c"})
	require.Equal(t, k, reminder.DigestKey([]string{"c", "b", "a"}))
	require.NotEqual(t, k, reminder.DigestKey([]string{"a", "b"}))
	require.True(t, strings.HasPrefix(k, reminder.DigestKeyPrefix))
	require.Len(t, k, len(reminder.DigestKeyPrefix)+64)
}

// The subscriber's digest replaces the update's ("off" included); only
// email and webhook subscribers can have one.
func TestASubscribersDigestReplacesTheUpdates(t *testing.T) {
	t.Parallel()
	doc := func(subs string) reminder.Update {
		u, err := reminder.ParseUpdate(strings.NewReader(`{"shipment_id":"S","update_id":"U","kind":"k","digest":"30m",
			"message":{"subject":"s","text":"t"},"subscribers":[` + subs + `]}`))
		require.NoError(t, err)
		return u
	}
	rems, err := doc(`{"id":"a","channel":"email","email":"a@b.example","due_at":"2026-12-01T09:10:00Z"},
		{"id":"b","channel":"email","email":"b@b.example","due_at":"2026-12-01T09:10:00Z","digest":"2h"},
		{"id":"c","channel":"email","email":"c@b.example","due_at":"2026-12-01T09:10:00Z","digest":"off"}`).
		Plan(reminder.PlanOptions{Now: now})
	require.NoError(t, err)
	require.Equal(t, 30*time.Minute, rems[0].Digest)
	require.Equal(t, time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC), rems[0].GoesOutAt())
	require.Equal(t, 2*time.Hour, rems[1].Digest)
	require.Equal(t, time.Duration(0), rems[2].Digest)
	require.Equal(t, rems[2].DueAt, rems[2].GoesOutAt())

	opts := reminder.PlanOptions{Now: now, Channels: map[reminder.Channel]reminder.CheckAddress{"pager": func(string) error { return nil }}}
	_, err = doc(`{"id":"p","channel":"pager","address":"+4915112345678","due_at":"2026-12-01T09:10:00Z"}`).Plan(opts)
	var fe *reminder.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "digest", fe.Field)
	require.Equal(t, "only an email or webhook subscriber can have a digest", fe.Problem)
	_, err = doc(`{"id":"p","channel":"pager","address":"+4915112345678","due_at":"2026-12-01T09:10:00Z","digest":"off"}`).Plan(opts)
	require.NoError(t, err, "a pager subscriber may turn the update's digest off")
}

// A tenant's default digest applies to its email and webhook subscribers
// whose update and subscriber name none, and passes other channels by.
func TestATenantsDefaultDigestAppliesWhenNoneIsNamed(t *testing.T) {
	t.Parallel()
	u, err := reminder.ParseUpdate(strings.NewReader(`{"shipment_id":"S","update_id":"U","kind":"k",
		"message":{"subject":"s","text":"t"},"subscribers":[
		{"id":"a","channel":"email","email":"a@b.example","due_at":"2026-12-01T09:10:00Z"},
		{"id":"b","channel":"email","email":"b@b.example","due_at":"2026-12-01T09:10:00Z","digest":"off"},
		{"id":"p","channel":"pager","address":"+4915112345678","due_at":"2026-12-01T09:10:00Z"}]}`))
	require.NoError(t, err)
	u.Tenant = "acme"
	rems, err := u.Plan(reminder.PlanOptions{Now: now,
		Channels: map[reminder.Channel]reminder.CheckAddress{"pager": func(string) error { return nil }},
		Windows:  reminder.WindowDefaults{"acme": {Digest: time.Hour}}})
	require.NoError(t, err)
	require.Equal(t, time.Hour, rems[0].Digest)
	require.Zero(t, rems[1].Digest, "the subscriber turned it off")
	require.Zero(t, rems[2].Digest, "a pager has no digest")
}

// A digest's key is told from anything else before the mirror is asked;
// its interval reads as the update document wrote it.
func TestADigestKeyAndIntervalReadAsWritten(t *testing.T) {
	t.Parallel()
	k := reminder.DigestKey([]string{"a"})
	require.True(t, reminder.IsDigestKey(k))
	for _, bad := range []string{"", reminder.DigestKeyPrefix, k[:len(k)-1], k + "0", strings.ToUpper(k),
		strings.TrimPrefix(k, reminder.DigestKeyPrefix), k[:len(k)-1] + "g", "x" + k[1:]} {
		require.False(t, reminder.IsDigestKey(bad), "%q", bad)
	}
	require.Equal(t, "30m", reminder.DigestEvery(30*time.Minute))
	require.Equal(t, "2h", reminder.DigestEvery(2*time.Hour))
	require.Equal(t, "1h30m", reminder.DigestEvery(90*time.Minute))
	require.Equal(t, "24h", reminder.DigestEvery(24*time.Hour))
	require.Equal(t, "goes out with its address's other reminders in a digest every 1m", reminder.GoingOutInDigest(time.Minute))
}
