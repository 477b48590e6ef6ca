package api

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/shipnotify/shipnotify/reminder"
	"golang.org/x/time/rate"
)

// Scope is what a key may do; each route needs one.
type Scope string

// The scopes. A tracker that schedules needs only schedule; an approver's
// tool only approve; a dashboard only read.
const (
	ScopeSchedule Scope = "schedule"
	ScopeOperate  Scope = "operate"
	ScopeApprove  Scope = "approve"
	ScopeRead     Scope = "read"
	// ScopeAdmin acts across tenants (?tenant=), beside a route's own
	// scope: a key without it acts within its own tenant only.
	ScopeAdmin Scope = "admin"
)

// Scopes lists every scope, in the order the documentation gives them.
var Scopes = []Scope{ScopeSchedule, ScopeOperate, ScopeApprove, ScopeRead, ScopeAdmin}

// KeyPrefix starts every key NewKey makes, so a key that leaks into a
// repository or a log is recognisable for secret scanners.
const KeyPrefix = "snk_"

// Key is an API key as the server knows it: a name (who, in the audit
// trail and the logs), its scopes and the SHA-256 of the key. The key itself
// is never kept: a copy of the configuration does not let anyone in.
type Key struct {
	Name   string
	Scopes []Scope
	Hash   [sha256.Size]byte
	// Tenant is the tenant the key belongs to, parsed once when the key
	// was (the zero Tenant is the default tenant).
	Tenant reminder.Tenant
	// Expires is when the key stops working (zero: never).
	Expires time.Time
}

// Allows reports whether the key carries scope.
func (k *Key) Allows(scope Scope) bool { return slices.Contains(k.Scopes, scope) }

// Expired reports whether the key has expired at now.
func (k *Key) Expired(now time.Time) bool { return Expired(k.Expires, now) }

// Line is the key's configuration line: "name scope,scope sha256hex",
// then its attributes, so it parses back to the same key.
func (k *Key) Line() string {
	scopes := make([]string, len(k.Scopes))
	for i, s := range k.Scopes {
		scopes[i] = string(s)
	}
	return k.Name + " " + strings.Join(scopes, ",") + " " + hex.EncodeToString(k.Hash[:]) +
		Attributes{Tenant: k.Tenant, Expires: k.Expires}.String()
}

// Attributes are the optional key=value tokens after a key line's hash
// (the console's approvers file has them too).
type Attributes struct {
	// Tenant is tenant=<name>: the tenant the key acts for.
	Tenant reminder.Tenant
	// Expires is expires=<RFC 3339 time, or a date: UTC midnight>.
	Expires time.Time
}

// String is the attributes as a line ends with them: " tenant=… expires=…",
// or "" when there are none.
func (a Attributes) String() string {
	var b strings.Builder
	if name := a.Tenant.Name(); name != "" {
		b.WriteString(" tenant=" + name)
	}
	if !a.Expires.IsZero() {
		b.WriteString(" expires=" + FormatExpiry(a.Expires))
	}
	return b.String()
}

// attributeName is what an error may name back: a token's text might be
// a key pasted in the wrong place, so anything else is not repeated.
var attributeName = regexp.MustCompile(`^[a-z_]{1,32}$`)

// ParseAttributes reads a line's key=value tokens. Each may appear once;
// an error names the attribute, never a token's value.
func ParseAttributes(tokens []string) (Attributes, error) {
	var a Attributes
	seen := map[string]bool{}
	for _, tok := range tokens {
		name, value, ok := strings.Cut(tok, "=")
		switch {
		case !ok:
			return Attributes{}, errors.New("after the hash only key=value attributes may follow (expires=…, tenant=…)")
		case !attributeName.MatchString(name):
			return Attributes{}, errors.New("an unknown attribute (want expires or tenant)")
		case seen[name]:
			return Attributes{}, fmt.Errorf("attribute %s given twice", name)
		}
		seen[name] = true
		var err error
		switch name {
		case "expires":
			if a.Expires, err = ParseExpiry(value); err != nil {
				return Attributes{}, fmt.Errorf("attribute %s: %w", name, err)
			}
		case "tenant":
			// The one parse of a key's (or an approver's) tenant; tenant=
			// with nothing after it is a mistake, not the default tenant.
			if value == "" {
				return Attributes{}, errors.New("attribute tenant: want letters, digits, '.', '_' or '-', at most 64 (it is empty)")
			}
			if IsGeneratedKey(value) {
				// A key is a valid id: refused here, or it would name a
				// tenant and be written back into lines and logs.
				return Attributes{}, errors.New("attribute tenant: it is a key, which goes to its holder only")
			}
			if a.Tenant, err = reminder.ParseTenant("attribute tenant", value); err != nil {
				return Attributes{}, err
			}
		default:
			return Attributes{}, fmt.Errorf("unknown attribute %s (want expires or tenant)", name)
		}
	}
	return a, nil
}

// ParseExpiry reads an expiry: an RFC 3339 time, or a date (YYYY-MM-DD),
// which is that day's UTC midnight. It is kept in UTC.
func ParseExpiry(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t, err = time.Parse(time.DateOnly, s)
	}
	if err != nil || t.IsZero() {
		return time.Time{}, errors.New("want an RFC 3339 time (2027-01-15T08:00:00Z) or a date (2027-01-15, UTC midnight)")
	}
	return t.UTC(), nil
}

// FormatExpiry writes an expiry as ParseExpiry reads it back: a date when
// it is UTC midnight, else an RFC 3339 time in UTC.
func FormatExpiry(t time.Time) string {
	t = t.UTC()
	if t.Equal(t.Truncate(24 * time.Hour)) {
		return t.Format(time.DateOnly)
	}
	return t.Format(time.RFC3339Nano)
}

// Expired reports whether an expiry (zero: never) has come at now.
func Expired(expires, now time.Time) bool { return !expires.IsZero() && !now.Before(expires) }

// IsGeneratedKey reports whether s has the form NewKey gives a key:
// KeyPrefix and 256 bits in unpadded base64url (43 characters). Where only
// a key's hash is configured, this is the one place its strength shows: the
// console refuses any other key before hashing it.
func IsGeneratedKey(s string) bool {
	rest, ok := strings.CutPrefix(s, KeyPrefix)
	b, err := base64.RawURLEncoding.Strict().DecodeString(rest)
	return ok && err == nil && len(b) == 32
}

// HashKey is the digest a key is stored and compared as. A plain SHA-256 is
// enough: keys are 256 random bits, so there is nothing to guess slowly.
func HashKey(key string) [sha256.Size]byte { return sha256.Sum256([]byte(key)) }

// NewKey makes a random key with name and scopes: the key to hand to the
// caller (shown once) and its Key, whose Line goes into the configuration.
func NewKey(name string, scopes []Scope) (string, Key, error) {
	k := Key{Name: name, Scopes: scopes}
	if err := k.check(); err != nil {
		return "", Key{}, err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", Key{}, fmt.Errorf("error making a key: %w", err)
	}
	secret := KeyPrefix + base64.RawURLEncoding.EncodeToString(b)
	k.Hash = HashKey(secret)
	return secret, k, nil
}

// check refuses a key no line may hold. Its errors name the key and the
// attribute, and repeat only what is known to be no secret (a known
// scope): a name or scope that is not one may be a key pasted into the
// wrong column, and an error goes to logs.
func (k *Key) check() error {
	if !reminder.IsID(k.Name) {
		return errors.New("the key's name is not an id (want letters, digits, '.', '_' or '-', at most 64)")
	}
	if IsGeneratedKey(k.Name) {
		return errors.New("the key's name is a key (the key itself goes to its holder only; run shipnotify api-key)")
	}
	if len(k.Scopes) == 0 {
		return fmt.Errorf("key %s: no scope", k.Name)
	}
	for i, s := range k.Scopes {
		if !slices.Contains(Scopes, s) {
			return fmt.Errorf("key %s: scope %d of the list is unknown (want %s)", k.Name, i+1, reminder.OneOf(Scopes))
		}
		if slices.Contains(k.Scopes[:i], s) {
			return fmt.Errorf("key %s: scope %s given twice", k.Name, s)
		}
	}
	return nil
}

// ParseScopes reads a comma-separated scope list.
func ParseScopes(s string) ([]Scope, error) {
	out := splitScopes(s)
	k := Key{Name: "x", Scopes: out}
	if err := k.check(); err != nil {
		return nil, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "key x: "))
	}
	return out, nil
}

func splitScopes(s string) []Scope {
	var out []Scope
	for _, p := range strings.Split(s, ",") {
		out = append(out, Scope(strings.TrimSpace(p)))
	}
	return out
}

// ParseKeys reads key lines, "name scope,scope sha256hex [attribute=value…]",
// one a line (or separated by ';', so they fit one environment variable);
// blank lines and lines starting with # are skipped. Names and hashes must
// be unique. An error names the entry and the attribute, never a hash, nor
// a name or scope that is not one (it may be a key in the wrong column).
func ParseKeys(r io.Reader) ([]Key, error) {
	var keys []Key
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		for entry := range strings.SplitSeq(sc.Text(), ";") {
			n++
			entry = strings.TrimSpace(entry)
			if entry == "" || strings.HasPrefix(entry, "#") {
				continue
			}
			k, err := parseKey(entry)
			if err != nil {
				return nil, fmt.Errorf("key entry %d: %w", n, err)
			}
			for _, o := range keys {
				switch {
				case o.Name == k.Name:
					return nil, fmt.Errorf("key entry %d: name %s given twice", n, k.Name)
				case o.Hash == k.Hash:
					return nil, fmt.Errorf("key entry %d: the same key as %s", n, o.Name)
				}
			}
			keys = append(keys, k)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("error reading keys: %w", err)
	}
	return keys, nil
}

func parseKey(entry string) (Key, error) {
	fields := strings.Fields(entry)
	if len(fields) < 3 {
		return Key{}, fmt.Errorf("want \"name scope,scope sha256hex\" (run shipnotify api-key to make one)")
	}
	// Checked as a key, so a scope's error names the key it is about.
	k := Key{Name: fields[0], Scopes: splitScopes(fields[1])}
	if err := k.check(); err != nil {
		return Key{}, err
	}
	h, err := hex.DecodeString(fields[2])
	if err != nil || len(h) != sha256.Size {
		return Key{}, fmt.Errorf("key %s: the hash is not 64 hex digits (a SHA-256; the key itself never goes here)", k.Name)
	}
	copy(k.Hash[:], h)
	attrs, err := ParseAttributes(fields[3:])
	if err != nil {
		return Key{}, fmt.Errorf("key %s: %w", k.Name, err)
	}
	k.Tenant, k.Expires = attrs.Tenant, attrs.Expires
	return k, nil
}

// keyring is the keys in force and their rate limiters; a reload swaps in
// a new one whole, so a request sees one set or the other.
type keyring struct {
	keys     []Key
	limiters map[string]*rate.Limiter
	// reminders are the keys' reminder buckets (chargeUpdate).
	reminders map[string]*rate.Limiter
	// tenants are the keys' tenants by name ("" the default), resolved
	// once against the default tenant's name.
	tenants map[string]string
}

// find returns the key whose hash is presented's, or nil. Every stored hash
// is compared, in constant time, whether or not an earlier one matched, so
// the time taken says nothing about which key, or how much of one, matched.
func (ks *keyring) find(presented string) *Key {
	h := HashKey(presented)
	var found *Key
	for i := range ks.keys {
		if subtle.ConstantTimeCompare(h[:], ks.keys[i].Hash[:]) == 1 && found == nil {
			found = &ks.keys[i]
		}
	}
	return found
}
