package links

import (
	"encoding/base64"
	"strings"
)

// UnsubscribePath is where serve takes one-click unsubscribes (RFC 8058):
// a reminder email's List-Unsubscribe header is UnsubscribePath + token
// under the public base URL.
const UnsubscribePath = "/unsubscribe/"

// Domain separation: an unsubscribe token's MAC never verifies a decision
// link, nor the other way round.
const unsubscribePurpose = "shipnotify unsubscribe\x00"

// UnsubscribeToken returns the token of the one-click unsubscribe link of
// one reminder's email: base64url(reminder id) "." base64url(MAC). It
// names the reminder, never the address (serve reads that from the
// mirror), and does not expire: a mailbox provider may post it long after
// the mail arrived, and a key rotated out ends it.
func (k Keys) UnsubscribeToken(reminderID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(reminderID)) + "." +
		base64.RawURLEncoding.EncodeToString(k.Sign(unsubscribePurpose+reminderID))
}

// CheckUnsubscribe verifies an unsubscribe token and returns the reminder
// it names; ErrInvalid for anything malformed, altered or signed with
// another key.
func (k Keys) CheckUnsubscribe(token string) (string, error) {
	enc, sig, ok := strings.Cut(token, ".")
	if !ok || len(token) > 1024 {
		return "", ErrInvalid
	}
	id, err := base64.RawURLEncoding.Strict().DecodeString(enc)
	if err != nil || len(id) == 0 {
		return "", ErrInvalid
	}
	sum, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err != nil || !k.Verify(unsubscribePurpose+string(id), sum) {
		return "", ErrInvalid
	}
	return string(id), nil
}

// UnsubscribeURL returns the one-click unsubscribe link of one reminder's
// email, under the signer's base URL.
func (s *Signer) UnsubscribeURL(reminderID string) string {
	u := *s.BaseURL
	u.Path = strings.TrimSuffix(u.Path, "/") + UnsubscribePath + s.Keys.UnsubscribeToken(reminderID)
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	return u.String()
}
