package links

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// UnsubscribePath is where serve takes one-click unsubscribes (RFC 8058):
// a reminder email's List-Unsubscribe header is UnsubscribePath + token
// under the public base URL.
const UnsubscribePath = "/unsubscribe/"

// UnsubscribeTTL is how long a one-click link works after it was made (at
// its mail's send). RFC 8058 asks for a link that works when a mailbox
// provider posts it, CAN-SPAM for an opt-out that works 30 days after the
// mail; a reminder is about a shipment due within weeks, so a quarter
// covers any mail still read, and a link copied from an old one ends.
const UnsubscribeTTL = 90 * 24 * time.Hour

// maxUnsubscribeLead is how far ahead of our clock a link's issue time may
// be: the worker's and serve's clocks differ a little.
const maxUnsubscribeLead = time.Hour

// Domain separation: an unsubscribe token's MAC never verifies a decision
// link, nor the other way round, nor one format's the other's.
const (
	unsubscribePurpose   = "shipnotify unsubscribe 2\x00"
	unsubscribePurposeV1 = "shipnotify unsubscribe\x00"
)

// unsubscribeVersion prefixes the signed payload of the current format.
const unsubscribeVersion = "2"

// UnsubscribeClaim is what a verified unsubscribe token says.
type UnsubscribeClaim struct {
	ReminderID string
	// Issued is when the link was made, to the millisecond; zero for a
	// link of the first format, which carried no time (it is outranked by
	// any lift of its address).
	Issued time.Time
}

// UnsubscribeToken returns the token of the one-click unsubscribe link of
// one reminder's email, made at issued: base64url("2|<issued Unix ms>|<reminder
// id>") "." base64url(MAC). It names the reminder, never the address
// (serve reads that from the mirror); the issue time ends it after
// UnsubscribeTTL and lets a later lift of the suppression outrank it.
func (k Keys) UnsubscribeToken(reminderID string, issued time.Time) string {
	payload := unsubscribeVersion + "|" + strconv.FormatInt(issued.UnixMilli(), 10) + "|" + reminderID
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." +
		base64.RawURLEncoding.EncodeToString(k.Sign(unsubscribePurpose+payload))
}

// CheckUnsubscribe verifies an unsubscribe token at now: ErrInvalid for
// anything malformed, altered, signed with another key or issued ahead of
// now; ErrExpired, with its authentic claim, for one older than
// UnsubscribeTTL. A token of the first format (the reminder id alone, made
// before links carried their time) verifies with a zero Issued: it cannot
// say its age, so it does not expire, and any lift outranks it.
func (k Keys) CheckUnsubscribe(token string, now time.Time) (UnsubscribeClaim, error) {
	enc, sig, ok := strings.Cut(token, ".")
	if !ok || len(token) > 1024 {
		return UnsubscribeClaim{}, ErrInvalid
	}
	payload, err := base64.RawURLEncoding.Strict().DecodeString(enc)
	if err != nil || len(payload) == 0 {
		return UnsubscribeClaim{}, ErrInvalid
	}
	sum, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err != nil {
		return UnsubscribeClaim{}, ErrInvalid
	}
	if k.Verify(unsubscribePurposeV1+string(payload), sum) {
		return UnsubscribeClaim{ReminderID: string(payload)}, nil
	}
	if !k.Verify(unsubscribePurpose+string(payload), sum) {
		return UnsubscribeClaim{}, ErrInvalid
	}
	parts := strings.SplitN(string(payload), "|", 3)
	if len(parts) != 3 || parts[0] != unsubscribeVersion || parts[2] == "" {
		return UnsubscribeClaim{}, ErrInvalid
	}
	ms, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return UnsubscribeClaim{}, ErrInvalid
	}
	c := UnsubscribeClaim{ReminderID: parts[2], Issued: time.UnixMilli(ms).UTC()}
	switch {
	case c.Issued.After(now.Add(maxUnsubscribeLead)):
		return UnsubscribeClaim{}, ErrInvalid
	case !now.Before(c.Issued.Add(UnsubscribeTTL)):
		return c, ErrExpired
	}
	return c, nil
}

// UnsubscribeURL returns the one-click unsubscribe link of one reminder's
// email, made now, under the signer's base URL.
func (s *Signer) UnsubscribeURL(reminderID string) string {
	u := *s.BaseURL
	u.Path = strings.TrimSuffix(u.Path, "/") + UnsubscribePath + s.Keys.UnsubscribeToken(reminderID, s.now())
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	return u.String()
}
