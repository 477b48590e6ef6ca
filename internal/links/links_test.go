package links_test

import (
	"crypto/rand"
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/links"
)

func newKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return base64.StdEncoding.EncodeToString(b)
}

func keys(t *testing.T, s string) links.Keys {
	t.Helper()
	k, err := links.ParseKeys(s)
	require.NoError(t, err)
	return k
}

func TestParseKeysWantsLongRandomKeys(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", " , ", "not base64!", base64.StdEncoding.EncodeToString([]byte("short key")), newKey(t) + ",%%%"} {
		_, err := links.ParseKeys(bad)
		require.Error(t, err, bad)
		require.NotContains(t, err.Error(), "%%%", "an error never echoes a key")
	}
	_, err := links.ParseKeys(newKey(t) + ", " + newKey(t))
	require.NoError(t, err)
}

// A link is bound to its reminder, its decision and its expiry: changing any
// byte, or presenting it to another key, makes it invalid; past its expiry
// it is expired, and says which reminder it was for.
func TestTokensAreBoundAndExpire(t *testing.T) {
	t.Parallel()
	k := keys(t, newKey(t))
	now := time.Now()
	claim := links.Claim{ReminderID: "SHP-1/window-1/ops", Decision: links.Approve, Expires: now.Add(time.Hour).Truncate(time.Second)}
	token := k.Token(claim)

	got, err := k.Check(token, now)
	require.NoError(t, err)
	require.Equal(t, claim.ReminderID, got.ReminderID)
	require.Equal(t, links.Approve, got.Decision)
	require.True(t, claim.Expires.Equal(got.Expires))

	// Expired: authentic, but refused.
	got, err = k.Check(token, claim.Expires)
	require.ErrorIs(t, err, links.ErrExpired)
	require.Equal(t, claim.ReminderID, got.ReminderID)

	// Another key.
	_, err = keys(t, newKey(t)).Check(token, now)
	require.ErrorIs(t, err, links.ErrInvalid)

	// Every single-character change of the token is refused.
	alphabet := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."
	for i := range len(token) {
		for _, c := range []byte{alphabet[i%len(alphabet)], alphabet[(i+7)%len(alphabet)]} {
			if c == token[i] {
				continue
			}
			altered := token[:i] + string(c) + token[i+1:]
			_, err := k.Check(altered, now)
			require.ErrorIs(t, err, links.ErrInvalid, "position %d", i)
		}
	}

	// A payload rewritten to another reminder, decision or expiry, with the
	// original signature, is refused.
	enc, sig, _ := strings.Cut(token, ".")
	payload, err := base64.RawURLEncoding.DecodeString(enc)
	require.NoError(t, err)
	for _, forged := range []string{
		strings.Replace(string(payload), "|approve|", "|reject|", 1),
		strings.Replace(string(payload), "SHP-1/", "SHP-2/", 1),
		strings.Replace(string(payload), "|1", "|9", 2),
	} {
		require.NotEqual(t, string(payload), forged)
		_, err := k.Check(base64.RawURLEncoding.EncodeToString([]byte(forged))+"."+sig, now)
		require.ErrorIs(t, err, links.ErrInvalid, forged)
	}
	for _, junk := range []string{"", ".", "abc", token + "." + sig, strings.Repeat("A", 2000) + "." + sig} {
		_, err := k.Check(junk, now)
		require.ErrorIs(t, err, links.ErrInvalid)
	}
}

// The first key signs and every key verifies, so links sent before a
// rotation keep working; keys derived for another purpose verify nothing.
func TestKeysRotateAndDeriveApart(t *testing.T) {
	t.Parallel()
	old, next := newKey(t), newKey(t)
	before := keys(t, old)
	after := keys(t, next+","+old)
	now := time.Now()
	token := before.Token(links.Claim{ReminderID: "r-1", Decision: links.Reject, Expires: now.Add(time.Hour)})
	_, err := after.Check(token, now)
	require.NoError(t, err)
	_, err = keys(t, next).Check(token, now)
	require.ErrorIs(t, err, links.ErrInvalid, "a retired key verifies nothing")

	session := before.Derive("console-session")
	require.False(t, session.Verify("x", before.Sign("x")))
	require.False(t, before.Verify("x", session.Sign("x")))
	require.True(t, after.Derive("console-session").Verify("x", session.Sign("x")), "derived keys rotate with their parent")
	_, err = session.Check(token, now)
	require.ErrorIs(t, err, links.ErrInvalid)

	require.True(t, after.Shares(before), "one key in common, in any place")
	require.False(t, keys(t, next).Shares(before))
}

func TestSignerMakesLinksUnderThePublicURL(t *testing.T) {
	t.Parallel()
	base, err := url.Parse("https://ops.example.com/shipnotify/?x=1#frag")
	require.NoError(t, err)
	now := time.Date(2027, 1, 12, 8, 0, 0, 0, time.UTC)
	s := &links.Signer{Keys: keys(t, newKey(t)), BaseURL: base, TTL: 24 * time.Hour, Now: func() time.Time { return now }}
	approve, reject, expires := s.DecisionLinks("SHP-1/window-1/ops")
	require.Equal(t, now.Add(24*time.Hour), expires)
	for want, link := range map[links.Decision]string{links.Approve: approve, links.Reject: reject} {
		require.True(t, strings.HasPrefix(link, "https://ops.example.com/shipnotify/console/link/"), link)
		token := strings.TrimPrefix(link, "https://ops.example.com/shipnotify/console/link/")
		c, err := s.Check(token)
		require.NoError(t, err)
		require.Equal(t, want, c.Decision)
		require.Equal(t, "SHP-1/window-1/ops", c.ReminderID)
	}
	require.NotEqual(t, approve, reject)
}

// An unsubscribe token carries the time it was made, to the millisecond,
// and ends links.UnsubscribeTTL after it (ErrExpired, with its authentic
// claim); one made ahead of our clock, tampered or signed with another key
// is invalid. A token of the first format, which carried no time, verifies
// with a zero issue time.
func TestUnsubscribeTokensCarryTheirIssueTime(t *testing.T) {
	t.Parallel()
	k := keys(t, newKey(t))
	now := time.Now()
	issued := now.Add(-time.Hour)
	c, err := k.CheckUnsubscribe(k.UnsubscribeToken("r1", issued), now)
	require.NoError(t, err)
	require.Equal(t, "r1", c.ReminderID)
	require.Equal(t, issued.UnixMilli(), c.Issued.UnixMilli())

	c, err = k.CheckUnsubscribe(k.UnsubscribeToken("r1", now.Add(-links.UnsubscribeTTL)), now)
	require.ErrorIs(t, err, links.ErrExpired)
	require.Equal(t, "r1", c.ReminderID)
	_, err = k.CheckUnsubscribe(k.UnsubscribeToken("r1", now.Add(2*time.Hour)), now)
	require.ErrorIs(t, err, links.ErrInvalid, "made ahead of our clock")
	_, err = keys(t, newKey(t)).CheckUnsubscribe(k.UnsubscribeToken("r1", issued), now)
	require.ErrorIs(t, err, links.ErrInvalid, "another key")
	tok := k.UnsubscribeToken("r1", issued)
	payload, _, _ := strings.Cut(k.UnsubscribeToken("r2", issued), ".")
	_, sig, _ := strings.Cut(tok, ".")
	_, err = k.CheckUnsubscribe(payload+"."+sig, now)
	require.ErrorIs(t, err, links.ErrInvalid, "tampered")
	_, err = k.Check(tok, now)
	require.ErrorIs(t, err, links.ErrInvalid, "never a decision link")

	first := base64.RawURLEncoding.EncodeToString([]byte("r1")) + "." +
		base64.RawURLEncoding.EncodeToString(k.Sign("shipnotify unsubscribe\x00r1"))
	c, err = k.CheckUnsubscribe(first, now.Add(10*links.UnsubscribeTTL))
	require.NoError(t, err, "the first format has no time to end at")
	require.Equal(t, links.UnsubscribeClaim{ReminderID: "r1"}, c)
}
