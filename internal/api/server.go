package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Timeouts of the API's server, on every phase of a request, so a slow or
// idle client cannot hold a connection and its goroutine for long: headers
// within 5 s, a whole body (1 MiB at most) within 30 s, the answer within
// the request timeout plus a margin, and idle keep-alive connections for
// two minutes.
const (
	ServerReadHeaderTimeout = 5 * time.Second
	ServerReadTimeout       = 30 * time.Second
	ServerIdleTimeout       = 2 * time.Minute
	ServerMaxHeaderBytes    = 64 << 10
	// writeMargin is the write timeout beyond the request timeout: the
	// handler's deadline comes first, so a late operation still answers
	// with its problem rather than a cut connection.
	writeMargin = 10 * time.Second
)

// NewServer is an HTTP server for h with the timeouts above; requestTimeout
// is the API's (0 means DefaultRequestTimeout).
func NewServer(h http.Handler, requestTimeout time.Duration) *http.Server {
	if requestTimeout <= 0 {
		requestTimeout = DefaultRequestTimeout
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ServerReadHeaderTimeout,
		ReadTimeout:       ServerReadTimeout,
		WriteTimeout:      requestTimeout + writeMargin,
		IdleTimeout:       ServerIdleTimeout,
		MaxHeaderBytes:    ServerMaxHeaderBytes,
	}
}

// Serve serves srv on ln until ctx ends, then shuts down gracefully: the
// listener closes at once (new connections are refused) and requests in
// flight run to their end, for up to drain; past it the remaining
// connections are closed. It returns nil after a graceful shutdown.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener, drain time.Duration) error {
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("error serving the API: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		_ = srv.Close()
		return fmt.Errorf("requests still running after %s were cut off: %w", drain, err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("error serving the API: %w", err)
	}
	return err
}
