// Package links makes and checks the one-click decision links an overdue
// approval's escalation email carries: an HMAC-SHA256-signed token bound to
// one reminder, one decision (approve or reject) and an expiry. A link only
// opens a confirmation page; the console acts on its button's POST.
package links

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Path is where the console serves link pages: a link is Path + token
// under the public base URL.
const Path = "/console/link/"

// Decision is what a link asks for.
type Decision string

// The two decisions a link can carry.
const (
	Approve Decision = "approve"
	Reject  Decision = "reject"
)

// Errors from Verify. Only a token whose signature checks out is
// ErrExpired, so the claim it comes with is authentic.
var (
	ErrInvalid = errors.New("the link is not valid")
	ErrExpired = errors.New("the link has expired")
)

// MinKeyBytes is the shortest signing key accepted.
const MinKeyBytes = 32

// Keys sign and verify: the first signs, every one verifies, so a key can
// be rotated without breaking the links already sent.
type Keys struct {
	keys [][]byte
}

// ParseKeys reads keys as base64 of at least 32 random bytes each,
// separated by commas or spaces.
func ParseKeys(s string) (Keys, error) {
	var k Keys
	for i, field := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		b, err := base64.StdEncoding.DecodeString(field)
		if err != nil {
			return Keys{}, fmt.Errorf("key %d: not base64", i+1)
		}
		if len(b) < MinKeyBytes {
			return Keys{}, fmt.Errorf("key %d: %d bytes; want at least %d random bytes", i+1, len(b), MinKeyBytes)
		}
		k.keys = append(k.keys, b)
	}
	if len(k.keys) == 0 {
		return Keys{}, errors.New("no keys")
	}
	return k, nil
}

// Empty reports whether there are no keys.
func (k Keys) Empty() bool { return len(k.keys) == 0 }

// Derive returns keys for another purpose (the console's session cookies),
// one for each of k: HMAC-SHA256(key, "shipnotify/"+purpose). A token made
// for one purpose never verifies for another.
func (k Keys) Derive(purpose string) Keys {
	out := Keys{keys: make([][]byte, len(k.keys))}
	for i, key := range k.keys {
		out.keys[i] = mac(key, "shipnotify/"+purpose)
	}
	return out
}

// Shares reports whether k and o hold a key in common. The console's
// session key must share none with the link keys, which the worker holds.
func (k Keys) Shares(o Keys) bool {
	for _, a := range k.keys {
		for _, b := range o.keys {
			if hmac.Equal(a, b) {
				return true
			}
		}
	}
	return false
}

// Sign returns the MAC of msg under the signing key.
func (k Keys) Sign(msg string) []byte {
	if len(k.keys) == 0 {
		panic("links: no keys")
	}
	return mac(k.keys[0], msg)
}

// Verify reports whether sum is msg's MAC under any of the keys, comparing
// in constant time (hmac.Equal).
func (k Keys) Verify(msg string, sum []byte) bool {
	ok := false
	for _, key := range k.keys {
		// Every key is tried, so the time taken does not say which matched.
		if hmac.Equal(mac(key, msg), sum) {
			ok = true
		}
	}
	return ok
}

func mac(key []byte, msg string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}

// Claim is what a verified token says.
type Claim struct {
	ReminderID string
	Decision   Decision
	Expires    time.Time
}

// tokenVersion prefixes the signed payload; a new format gets a new one.
const tokenVersion = "1"

// Domain separation: a link's MAC never verifies anything else signed with
// the same keys.
const linkPurpose = "shipnotify link\x00"

// Token returns the signed token of c: base64url(payload) "." base64url(MAC),
// the payload being "1|<decision>|<expiry unix seconds>|<reminder id>".
func (k Keys) Token(c Claim) string {
	payload := strings.Join([]string{tokenVersion, string(c.Decision), strconv.FormatInt(c.Expires.Unix(), 10), c.ReminderID}, "|")
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." +
		base64.RawURLEncoding.EncodeToString(k.Sign(linkPurpose+payload))
}

// Check verifies token at now: ErrInvalid for anything malformed, altered
// or signed with another key; ErrExpired, with its authentic claim, for a
// token past its expiry.
func (k Keys) Check(token string, now time.Time) (Claim, error) {
	enc, sig, ok := strings.Cut(token, ".")
	if !ok || len(token) > 1024 {
		return Claim{}, ErrInvalid
	}
	payload, err := base64.RawURLEncoding.Strict().DecodeString(enc)
	if err != nil {
		return Claim{}, ErrInvalid
	}
	sum, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err != nil || !k.Verify(linkPurpose+string(payload), sum) {
		return Claim{}, ErrInvalid
	}
	parts := strings.SplitN(string(payload), "|", 4)
	if len(parts) != 4 || parts[0] != tokenVersion || parts[3] == "" {
		return Claim{}, ErrInvalid
	}
	c := Claim{ReminderID: parts[3], Decision: Decision(parts[1])}
	if c.Decision != Approve && c.Decision != Reject {
		return Claim{}, ErrInvalid
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return Claim{}, ErrInvalid
	}
	c.Expires = time.Unix(exp, 0).UTC()
	if !now.Before(c.Expires) {
		return c, ErrExpired
	}
	return c, nil
}

// Signer makes the links of escalation emails and checks them when opened.
type Signer struct {
	Keys Keys
	// BaseURL is the public base URL the console is reached at
	// (SHIPNOTIFY_PUBLIC_URL); links are BaseURL + Path + token.
	BaseURL *url.URL
	// TTL is how long a link stays valid (0 means DefaultTTL).
	TTL time.Duration
	// Now is the clock (nil means time.Now).
	Now func() time.Time
}

// DefaultTTL is how long a link stays valid: the default final deadline of
// an approval, counted from scheduling, so a link never outlives it by much.
const DefaultTTL = 72 * time.Hour

func (s *Signer) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

func (s *Signer) ttl() time.Duration {
	if s.TTL <= 0 {
		return DefaultTTL
	}
	return s.TTL
}

// URL returns the link carrying token.
func (s *Signer) URL(token string) string {
	u := *s.BaseURL
	u.Path = strings.TrimSuffix(u.Path, "/") + Path + token
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	return u.String()
}

// DecisionLinks returns the links to approve and to reject one reminder,
// valid until expires. It is what the escalation email carries.
func (s *Signer) DecisionLinks(reminderID string) (approve, reject string, expires time.Time) {
	expires = s.now().Add(s.ttl()).UTC().Truncate(time.Second)
	approve = s.URL(s.Keys.Token(Claim{ReminderID: reminderID, Decision: Approve, Expires: expires}))
	reject = s.URL(s.Keys.Token(Claim{ReminderID: reminderID, Decision: Reject, Expires: expires}))
	return approve, reject, expires
}

// Check verifies a token from a link at the signer's clock.
func (s *Signer) Check(token string) (Claim, error) {
	return s.Keys.Check(token, s.now())
}
