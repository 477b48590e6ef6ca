package api

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
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
	// ScopeAdmin acts across tenants (?tenant=), beside a route's own scope.
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
	// Tenant is the tenant the key belongs to, as written ("" is the
	// default tenant).
	Tenant string
}

// Allows reports whether the key carries scope.
func (k *Key) Allows(scope Scope) bool { return slices.Contains(k.Scopes, scope) }

// Line is the key's configuration line: "name scope,scope sha256hex".
func (k *Key) Line() string {
	scopes := make([]string, len(k.Scopes))
	for i, s := range k.Scopes {
		scopes[i] = string(s)
	}
	return k.Name + " " + strings.Join(scopes, ",") + " " + hex.EncodeToString(k.Hash[:])
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

var keyNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func (k *Key) check() error {
	if !keyNamePattern.MatchString(k.Name) {
		return fmt.Errorf("key name %q: want letters, digits, '.', '_' or '-', at most 64", k.Name)
	}
	if len(k.Scopes) == 0 {
		return fmt.Errorf("key %s: no scope", k.Name)
	}
	for i, s := range k.Scopes {
		if !slices.Contains(Scopes, s) {
			return fmt.Errorf("key %s: unknown scope %q (want schedule, operate, approve or read)", k.Name, s)
		}
		if slices.Contains(k.Scopes[:i], s) {
			return fmt.Errorf("key %s: scope %s given twice", k.Name, s)
		}
	}
	return nil
}

// ParseScopes reads a comma-separated scope list.
func ParseScopes(s string) ([]Scope, error) {
	var out []Scope
	for _, p := range strings.Split(s, ",") {
		out = append(out, Scope(strings.TrimSpace(p)))
	}
	k := Key{Name: "x", Scopes: out}
	if err := k.check(); err != nil {
		return nil, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "key x: "))
	}
	return out, nil
}

// ParseKeys reads key lines, "name scope,scope sha256hex", one a line (or
// separated by ';', so they fit one environment variable); blank lines and
// lines starting with # are skipped. Names and hashes must be unique. An
// error names the line, never a hash.
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
	if len(fields) != 3 {
		return Key{}, fmt.Errorf("want \"name scope,scope sha256hex\" (run shipnotify api-key to make one)")
	}
	scopes, err := ParseScopes(fields[1])
	if err != nil {
		return Key{}, err
	}
	k := Key{Name: fields[0], Scopes: scopes}
	if err := k.check(); err != nil {
		return Key{}, err
	}
	h, err := hex.DecodeString(fields[2])
	if err != nil || len(h) != sha256.Size {
		return Key{}, fmt.Errorf("key %s: the hash is not 64 hex digits (a SHA-256; the key itself never goes here)", k.Name)
	}
	copy(k.Hash[:], h)
	return k, nil
}

// keyring finds the key a request presents.
type keyring []Key

// find returns the key whose hash is presented's, or nil. Every stored hash
// is compared, in constant time, whether or not an earlier one matched, so
// the time taken says nothing about which key, or how much of one, matched.
func (ks keyring) find(presented string) *Key {
	h := HashKey(presented)
	var found *Key
	for i := range ks {
		if subtle.ConstantTimeCompare(h[:], ks[i].Hash[:]) == 1 && found == nil {
			found = &ks[i]
		}
	}
	return found
}
