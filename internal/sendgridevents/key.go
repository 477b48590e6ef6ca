package sendgridevents

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/sendgrid/sendgrid-go/helpers/eventwebhook"
)

// ParseVerificationKey reads the Event Webhook's verification key as
// SendGrid's settings page shows it: base64 of the DER-encoded ECDSA
// public key.
func ParseVerificationKey(s string) (*ecdsa.PublicKey, error) {
	// The helper assumes an ECDSA key and panics on any other kind; look
	// first, so a pasted RSA key is an error, not a crash.
	der, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("want base64 of the key SendGrid's Event Webhook settings show")
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("not a public key: %w", err)
	}
	if _, ok := pub.(*ecdsa.PublicKey); !ok {
		return nil, fmt.Errorf("want an ECDSA key, got %T", pub)
	}
	return eventwebhook.ConvertPublicKeyBase64ToECDSA(s)
}
