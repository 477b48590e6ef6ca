package email

import (
	"fmt"
	"net/http"
	"time"
)

// DefaultCredentialsRetry is how long a delivery refused for our key (401,
// 403) waits before its next attempt. A key is fixed by a person, in
// minutes, not seconds: a minute spares SendGrid the retry policy's 1 s,
// 2 s, 4 s… first attempts while the key is bad, and sends the backlog within
// a minute of the fix instead of up to the policy's 10-minute ceiling.
const DefaultCredentialsRetry = time.Minute

// CredentialState is what SendGrid last said about our API key. A refused
// key is the operator's to fix, so it is kept where /readyz and the metrics
// can show it, instead of failing every reminder due meanwhile.
type CredentialState struct {
	// Refused: the latest answer that tells was 401 or 403, not a 2xx.
	Refused bool
	// Status is the latest refusal's status (401 or 403) while Refused.
	Status int
	// Since is the first refusal after the last accepted call, while Refused.
	Since time.Time
	// Refusals counts every 401 and 403 the sender has had, for a counter
	// that shows refusals between two scrapes.
	Refusals uint64
}

// Err is nil unless the key is refused; then it names the cause, for an
// operator reading /readyz.
func (c CredentialState) Err() error {
	if !c.Refused {
		return nil
	}
	return fmt.Errorf("sendgrid: refusing our API key (%d %s) since %s",
		c.Status, http.StatusText(c.Status), c.Since.UTC().Format(time.RFC3339))
}

// Credentials reports SendGrid's latest word on our key; safe to call
// while sends run.
func (s *Sender) Credentials() CredentialState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.creds
}

// noteAnswer keeps the credential state: a 401 or 403 sets it, a 2xx
// clears it, and anything else says nothing about the key.
func (s *Sender) noteAnswer(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case status >= 200 && status < 300:
		s.creds = CredentialState{Refusals: s.creds.Refusals}
	case refusesCredentials(status):
		if !s.creds.Refused {
			s.creds.Refused, s.creds.Since = true, s.now()
		}
		s.creds.Status = status
		s.creds.Refusals++
	}
}

// refusesCredentials: SendGrid answers 401 for a missing, revoked or
// rotated key and 403 for a key without the mail.send scope or a sender
// identity it has not verified. Both are fixed in our configuration, not
// in the message.
func refusesCredentials(status int) bool {
	return status == http.StatusUnauthorized || status == http.StatusForbidden
}
