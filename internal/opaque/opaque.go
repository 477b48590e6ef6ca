// Package opaque seals the mirror's global sequence numbers (audit trail
// event ids, the change feed's positions) into the ids and cursors a
// tenant sees. Those numbers count every tenant's activity: acme's events
// 4902 and 4910 say globex wrote seven between them. Sealed, two of a
// tenant's ids tell it nothing but that they differ, and the server keeps
// its ordering to itself.
package opaque

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MinKeyBytes is the shortest key accepted: 32 random bytes.
const MinKeyBytes = 32

// EventPrefix begins every event id, as it began the numbered ones.
const EventPrefix = "evt_"

// Keys seal ids under the first key and open cursors under any, so a key
// can be rotated in (put first, keep the old one after it) without
// refusing the cursors trackers hold.
type Keys struct {
	events  []cipher.Block
	cursors []cipher.AEAD
}

// ParseKeys reads keys as base64 of at least MinKeyBytes random bytes
// each, separated by commas or spaces (SHIPNOTIFY_ID_KEY). An error names
// a key by its place, never its value.
func ParseKeys(s string) (*Keys, error) {
	var raw [][]byte
	for i, field := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		b, err := base64.StdEncoding.DecodeString(field)
		if err != nil {
			return nil, fmt.Errorf("key %d: not base64", i+1)
		}
		if len(b) < MinKeyBytes {
			return nil, fmt.Errorf("key %d: %d bytes; want at least %d random bytes", i+1, len(b), MinKeyBytes)
		}
		raw = append(raw, b)
	}
	return New(raw...)
}

// New makes Keys of raw keys, the first sealing.
func New(raw ...[]byte) (*Keys, error) {
	if len(raw) == 0 {
		return nil, errors.New("no keys")
	}
	k := &Keys{}
	for _, key := range raw {
		// One key, two purposes: a subkey each, so an event id is never
		// a cursor's block under the same key.
		ev, err := aes.NewCipher(derive(key, "shipnotify/ids/event"))
		if err != nil {
			return nil, fmt.Errorf("error making the event id cipher: %w", err)
		}
		block, err := aes.NewCipher(derive(key, "shipnotify/ids/cursor"))
		if err != nil {
			return nil, fmt.Errorf("error making the cursor cipher: %w", err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("error making the cursor cipher: %w", err)
		}
		k.events, k.cursors = append(k.events, ev), append(k.cursors, aead)
	}
	return k, nil
}

// Development is the key used while SHIPNOTIFY_ID_KEY is unset: written in
// this file, so anyone can open what it seals. It keeps a development
// stack and its replicas agreeing; a deployment with tenants sets its own.
func Development() *Keys {
	sum := sha256.Sum256([]byte("shipnotify development id key: public, never for production"))
	k, _ := New(sum[:])
	return k
}

func derive(key []byte, purpose string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(purpose))
	return h.Sum(nil)
}

// EventID is the id a tenant sees for the audit trail event trail:
// EventPrefix and the AES block of the number, base64url. The same event
// has the same id every time (a status event's webhook-id, its place in
// the trail, the feed's last_change), and two events' ids say nothing of
// how far apart they are. A new first key gives every event a new id.
func (k *Keys) EventID(trail int64) string {
	var b [aes.BlockSize]byte
	binary.BigEndian.PutUint64(b[:8], uint64(trail))
	k.events[0].Encrypt(b[:], b[:])
	return EventPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// OutboxEventID is EventID of the id the outbox keeps (evt_ and the trail
// event's number, as the trail's trigger writes it): the id the tracker
// is posted.
func (k *Keys) OutboxEventID(outboxed string) (string, error) {
	digits, ok := strings.CutPrefix(outboxed, EventPrefix)
	n, err := strconv.ParseInt(digits, 10, 64)
	if !ok || err != nil {
		return "", fmt.Errorf("event id %q: not evt_ and a trail event's number", outboxed)
	}
	return k.EventID(n), nil
}

// Seal encrypts and authenticates a cursor's content for purpose (so a
// cursor of one kind never opens as another's), under a fresh nonce: the
// same place gives a different cursor each time.
func (k *Keys) Seal(purpose string, plain []byte) string {
	aead := k.cursors[0]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic("opaque: no randomness: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, plain, []byte(purpose)))
}

// Open returns what Seal sealed for purpose under any of the keys; false
// for anything else (altered, made up, another purpose's, or sealed under
// a key since removed).
func (k *Keys) Open(purpose, s string) ([]byte, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, false
	}
	for _, aead := range k.cursors {
		if len(b) < aead.NonceSize()+aead.Overhead() {
			return nil, false
		}
		if plain, err := aead.Open(nil, b[:aead.NonceSize()], b[aead.NonceSize():], []byte(purpose)); err == nil {
			return plain, true
		}
	}
	return nil, false
}
