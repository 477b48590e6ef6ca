package opaque_test

import (
	"crypto/rand"
	"encoding/base64"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/opaque"
)

func newKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, opaque.MinKeyBytes)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return base64.StdEncoding.EncodeToString(b)
}

// An event's id is the same every time under the same key, differs from
// every other event's, and is evt_ and 22 base64url characters: nothing
// in it counts events.
func TestAnEventIdIsStableDistinctAndOpaque(t *testing.T) {
	t.Parallel()
	k, err := opaque.ParseKeys(newKey(t))
	require.NoError(t, err)
	form := regexp.MustCompile(`^evt_[A-Za-z0-9_-]{22}$`)
	seen := map[string]int64{}
	for n := int64(1); n <= 1000; n++ {
		id := k.EventID(n)
		require.Regexp(t, form, id)
		require.Equal(t, id, k.EventID(n), "stable")
		prev, dup := seen[id]
		require.False(t, dup, "events %d and %d share an id", prev, n)
		seen[id] = n
	}
	other, err := opaque.ParseKeys(newKey(t))
	require.NoError(t, err)
	require.NotEqual(t, k.EventID(7), other.EventID(7), "another deployment's key, other ids")
	id, err := k.OutboxEventID("evt_7")
	require.NoError(t, err)
	require.Equal(t, k.EventID(7), id, "the outbox's evt_7 is posted as event 7's id")
	_, err = k.OutboxEventID("7")
	require.Error(t, err)
}

// A cursor opens to what was sealed, under the key that sealed it or
// after a rotation (a new key first, the old one kept); it does not open
// altered, for another purpose, or once its key is dropped.
func TestACursorOpensOnlyAsSealed(t *testing.T) {
	t.Parallel()
	oldKey, newer := newKey(t), newKey(t)
	k, err := opaque.ParseKeys(oldKey)
	require.NoError(t, err)
	c := k.Seal("feed", []byte("position"))
	require.NotEqual(t, c, k.Seal("feed", []byte("position")), "a fresh nonce each time")
	got, ok := k.Open("feed", c)
	require.True(t, ok)
	require.Equal(t, "position", string(got))

	rotated, err := opaque.ParseKeys(newer + "," + oldKey)
	require.NoError(t, err)
	got, ok = rotated.Open("feed", c)
	require.True(t, ok, "a cursor sealed before the rotation still opens")
	require.Equal(t, "position", string(got))

	dropped, err := opaque.ParseKeys(newer)
	require.NoError(t, err)
	for name, try := range map[string]func() bool{
		"its key dropped":    func() bool { _, ok := dropped.Open("feed", c); return ok },
		"another purpose":    func() bool { _, ok := k.Open("list", c); return ok },
		"altered":            func() bool { _, ok := k.Open("feed", flip(c)); return ok },
		"cut short":          func() bool { _, ok := k.Open("feed", c[:10]); return ok },
		"not base64":         func() bool { _, ok := k.Open("feed", "not a cursor!"); return ok },
		"an old JSON cursor": func() bool { _, ok := k.Open("feed", "eyJ4Ijo4MjcsImUiOjl9"); return ok },
	} {
		require.False(t, try(), name)
	}
}

// flip changes a cursor's first character (all six of its bits are the
// nonce's; the last one's lowest bits are padding).
func flip(c string) string {
	first := "A"
	if strings.HasPrefix(c, "A") {
		first = "B"
	}
	return first + c[1:]
}

// A bad key is refused naming its place, never its value.
func TestABadKeyIsNamedByItsPlace(t *testing.T) {
	t.Parallel()
	short := base64.StdEncoding.EncodeToString([]byte("too short a secret"))
	_, err := opaque.ParseKeys(newKey(t) + "," + short)
	require.ErrorContains(t, err, "key 2")
	require.NotContains(t, err.Error(), short)
	_, err = opaque.ParseKeys("%%%")
	require.ErrorContains(t, err, "key 1: not base64")
	_, err = opaque.ParseKeys(" , ")
	require.Error(t, err)
}
