package reminder

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"time"
)

// Digest bounds: an interval is whole minutes, from one minute to a day.
const (
	MinDigest = time.Minute
	MaxDigest = 24 * time.Hour
	// MaxDigestMembers bounds one digest message: reminders past it, due
	// at the same time to the same address, go out in the next digest the
	// first member's retry forms (a letter of a thousand shipments helps no
	// one, and a webhook body stays small).
	MaxDigestMembers = 100
)

// DigestAt is when a reminder that goes out at t on its own goes out in a
// digest every interval: the next boundary of the interval at or after t
// (t itself when it is one), counted from the zero time, so every member
// due within one interval to one address meets at the same boundary. An
// interval of 0 is no digest: t.
func DigestAt(t time.Time, every time.Duration) time.Time {
	if every <= 0 {
		return t
	}
	b := t.Truncate(every)
	if b.Before(t) {
		b = b.Add(every)
	}
	return b
}

// DigestKeyPrefix begins every digest's key (DigestKey), and no other key.
const DigestKeyPrefix = "digest_"

// DigestKey is the delivery key of the one message a digest's members go
// out in: derived from the members' own keys, in any order, so the same
// members make the same key (a retry after a crash sends under the key the
// first attempt used), and it never equals a reminder's own key.
func DigestKey(memberKeys []string) string {
	keys := slices.Clone(memberKeys)
	slices.Sort(keys)
	sum := sha256.Sum256([]byte("digest|" + strings.Join(keys, "|")))
	return DigestKeyPrefix + hex.EncodeToString(sum[:])
}

// IsDigestKey reports whether s is a digest's key as DigestKey makes
// one: DigestKeyPrefix and 64 lowercase hex digits. The CLI and the
// console refuse any other before asking the mirror.
func IsDigestKey(s string) bool {
	hexPart, ok := strings.CutPrefix(s, DigestKeyPrefix)
	if !ok || len(hexPart) != 2*sha256.Size {
		return false
	}
	for _, c := range hexPart {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// checkDigest refuses an interval a digest cannot take, naming field.
func checkDigest(field string, every time.Duration) error {
	switch {
	case every < MinDigest || every > MaxDigest:
		return fieldErr(field, "must be from 1m to 24h")
	case every%time.Minute != 0:
		return fieldErr(field, "must be whole minutes")
	}
	return nil
}

// parseDigest reads a digest field: "" (unset), "off" (none, replacing
// the update's), or an interval ("30m", "2h").
func parseDigest(field, s string) (*time.Duration, error) {
	switch s {
	case "":
		return nil, nil
	case "off":
		off := time.Duration(0)
		return &off, nil
	}
	d, err := ParseDuration(s)
	if err != nil || d < 0 {
		return nil, fieldErr(field, "is not an interval such as 30m, or off")
	}
	if err := checkDigest(field, d); err != nil {
		return nil, err
	}
	return &d, nil
}
