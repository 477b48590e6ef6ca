package delivery_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/delivery"
)

// Every transport failure, as net/http hands it over (wrapped in a
// *url.Error naming the URL, its dial error naming the address and the
// resolver), is told as one of the fixed reasons, and neither the reason
// nor the operator's detail repeats the host, the address or the resolver.
func TestUnreachedTellsAFixedReasonAndNamesNoHost(t *testing.T) {
	t.Parallel()
	const host, addr, resolver = "hooks.customer-42.example", "203.0.113.7:443", "10.96.0.10:53"
	remote, err := net.ResolveTCPAddr("tcp", addr)
	require.NoError(t, err)
	dial := func(err error) error { return &net.OpError{Op: "dial", Net: "tcp", Addr: remote, Err: err} }
	leaf := &x509.Certificate{DNSNames: []string{"other.example"}}
	for _, tc := range []struct {
		err    error
		reason string
	}{
		{dial(&net.DNSError{Err: "no such host", Name: host, Server: resolver, IsNotFound: true}), delivery.ReasonNotResolved},
		{dial(&net.DNSError{Err: "server misbehaving", Name: host, Server: resolver, IsTemporary: true}), delivery.ReasonLookupFailed},
		{dial(&net.DNSError{Err: "i/o timeout", Name: host, Server: resolver, IsTimeout: true}), delivery.ReasonLookupFailed},
		{dial(os.NewSyscallError("connect", syscall.ECONNREFUSED)), delivery.ReasonRefused},
		{&net.OpError{Op: "read", Net: "tcp", Addr: remote, Err: os.NewSyscallError("read", syscall.ECONNRESET)}, delivery.ReasonReset},
		{dial(os.NewSyscallError("connect", syscall.EHOSTUNREACH)), delivery.ReasonUnreachable},
		{dial(os.NewSyscallError("connect", syscall.ETIMEDOUT)), delivery.ReasonConnectTimeout},
		{dial(os.ErrDeadlineExceeded), delivery.ReasonConnectTimeout},
		{&tls.CertificateVerificationError{Err: x509.HostnameError{Certificate: leaf, Host: host}}, delivery.ReasonTLSHost},
		{&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{Cert: leaf}}, delivery.ReasonTLSAuthority},
		{&tls.CertificateVerificationError{Err: x509.CertificateInvalidError{Cert: leaf, Reason: x509.Expired, Detail: host}}, delivery.ReasonTLSExpired},
		{tls.AlertError(40), delivery.ReasonTLS},
		{context.DeadlineExceeded, delivery.ReasonTimeout},
		{context.Canceled, delivery.ReasonCancelled},
		{fmt.Errorf("read from %s: %w", addr, errors.New("unexpected EOF")), delivery.ReasonFailed},
	} {
		err := &url.Error{Op: "Post", URL: "https://" + host + "/in?token=s3cret", Err: tc.err}
		reason, detail := delivery.Unreached(err)
		require.Equal(t, tc.reason, reason, "%v", err)
		require.True(t, slices.Contains(delivery.Reasons, reason), reason)
		for _, leak := range []string{host, "203.0.113.7", "10.96.0.10", "s3cret"} {
			require.NotContains(t, reason+" "+detail, leak, "%v", err)
		}
	}
}
