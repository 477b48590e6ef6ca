package delivery

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// Why a request got no answer, in words that name no host, address or
// resolver. A transport error's own text does ("lookup hooks.customer.example
// on 10.0.0.10:53: no such host"), and the reason reaches the reminder's
// trail, the tracker, the escalation contact and the status outbox, so
// Unreached answers one of these, whatever the error.
const (
	ReasonNotResolved    = "the host name did not resolve"
	ReasonLookupFailed   = "the host name could not be looked up"
	ReasonRefused        = "the connection was refused"
	ReasonReset          = "the connection was reset"
	ReasonUnreachable    = "the network or host is unreachable"
	ReasonConnectTimeout = "the connection timed out"
	ReasonTLSTimeout     = "TLS handshake timed out"
	ReasonTimeout        = "the request timed out"
	ReasonTLSHost        = "TLS handshake failed: certificate not valid for the host"
	ReasonTLSAuthority   = "TLS handshake failed: certificate signed by an unknown authority"
	ReasonTLSExpired     = "TLS handshake failed: certificate expired or not yet valid"
	ReasonTLSPlain       = "TLS handshake failed: the server answered in plain HTTP"
	ReasonTLS            = "TLS handshake failed"
	ReasonClosed         = "the connection closed before an answer"
	ReasonCancelled      = "the request was cancelled"
	ReasonFailed         = "the request failed"
)

// Reasons are all the reasons Unreached gives: the closed set.
var Reasons = []string{
	ReasonNotResolved, ReasonLookupFailed, ReasonRefused, ReasonReset, ReasonUnreachable,
	ReasonConnectTimeout, ReasonTLSTimeout, ReasonTimeout, ReasonTLSHost, ReasonTLSAuthority,
	ReasonTLSExpired, ReasonTLSPlain, ReasonTLS, ReasonClosed, ReasonCancelled, ReasonFailed,
}

// Unreached classifies a request's failure without an answer into one of
// the fixed reasons, and a detail for the operator's log that names no
// host, address or resolver either (the resolver's verdict, the socket's
// errno); detail is "" when the reason says all that can be said safely.
func Unreached(err error) (reason, detail string) {
	var dnsErr *net.DNSError
	var errno syscall.Errno
	var hostErr x509.HostnameError
	var authErr x509.UnknownAuthorityError
	var certErr x509.CertificateInvalidError
	var recordErr tls.RecordHeaderError
	var alertErr tls.AlertError
	var verifyErr *tls.CertificateVerificationError
	var opErr *net.OpError
	switch {
	case errors.As(err, &dnsErr):
		// Err is the resolver's verdict ("no such host", "server
		// misbehaving"); Name and Server are what must not leave.
		detail = "resolver: " + dnsErr.Err
		if dnsErr.IsNotFound {
			return ReasonNotResolved, detail
		}
		return ReasonLookupFailed, detail
	case errors.As(err, &hostErr):
		return ReasonTLSHost, ""
	case errors.As(err, &authErr):
		return ReasonTLSAuthority, ""
	case errors.As(err, &certErr) && certErr.Reason == x509.Expired:
		return ReasonTLSExpired, ""
	case errors.As(err, &certErr), errors.As(err, &recordErr), errors.As(err, &alertErr), errors.As(err, &verifyErr):
		return ReasonTLS, ""
	case errors.As(err, &errno):
		detail = "errno " + errno.Error()
		switch errno {
		case syscall.ECONNREFUSED:
			return ReasonRefused, detail
		case syscall.ECONNRESET, syscall.EPIPE, syscall.ECONNABORTED:
			return ReasonReset, detail
		case syscall.ENETUNREACH, syscall.EHOSTUNREACH, syscall.EHOSTDOWN, syscall.ENETDOWN, syscall.EADDRNOTAVAIL:
			return ReasonUnreachable, detail
		case syscall.ETIMEDOUT:
			return ReasonConnectTimeout, detail
		}
		return ReasonFailed, detail
	case errors.As(err, &opErr) && opErr.Op == "dial" && opErr.Timeout():
		return ReasonConnectTimeout, ""
	case isTimeout(err) && strings.Contains(err.Error(), "TLS handshake timeout"):
		// net/http's own fixed texts: their error types are unexported.
		return ReasonTLSTimeout, ""
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return ReasonTLSPlain, ""
	case isTimeout(err), errors.Is(err, context.DeadlineExceeded):
		return ReasonTimeout, ""
	case errors.Is(err, context.Canceled):
		return ReasonCancelled, ""
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ReasonClosed, ""
	}
	return ReasonFailed, ""
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
