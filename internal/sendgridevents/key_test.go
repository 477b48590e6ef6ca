package sendgridevents_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/sendgridevents"
	"github.com/shipnotify/shipnotify/internal/sink"
)

// The key as SendGrid shows it parses; anything else is an error, never
// the helper's panic on a key that is not ECDSA.
func TestVerificationKeys(t *testing.T) {
	t.Parallel()
	k, err := sink.NewEventKey()
	require.NoError(t, err)
	pub, err := sendgridevents.ParseVerificationKey(k.PublicKey())
	require.NoError(t, err)
	require.NotNil(t, pub)

	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	der, err := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	require.NoError(t, err)
	for name, s := range map[string]string{
		"not base64": "not a key!",
		"not a key":  base64.StdEncoding.EncodeToString([]byte("hello")),
		"an RSA key": base64.StdEncoding.EncodeToString(der),
	} {
		_, err := sendgridevents.ParseVerificationKey(s)
		require.Error(t, err, name)
	}
}
