package metrics

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/singleflight"
)

// ReadyTimeout bounds one readiness check.
const ReadyTimeout = 5 * time.Second

// Timeouts of the ops server (NewServer): a slow or idle client cannot hold
// a connection and its goroutine for long. A scrape or a readiness check
// answers well within the write timeout.
const (
	ServerReadHeaderTimeout = 5 * time.Second
	ServerReadTimeout       = 10 * time.Second
	ServerWriteTimeout      = 30 * time.Second
	ServerIdleTimeout       = 2 * time.Minute
)

// Unready is a readiness failure fit to show: Reason is what /readyz
// answers ("postgres: unavailable"), and Err the detail, for the
// server's own log only. A driver's error text can name hosts, users and
// internals, which a probe's body must not.
type Unready struct {
	Reason string
	Err    error
}

func (u *Unready) Error() string {
	if u.Err == nil {
		return u.Reason
	}
	return u.Reason + ": " + u.Err.Error()
}

func (u *Unready) Unwrap() error { return u.Err }

// CredentialsReady is a readiness check that fails while src's provider
// refuses our key, saying so (our own words: status and since when).
func CredentialsReady(src CredentialSource) func(context.Context) error {
	return func(context.Context) error {
		if err := src.Credentials().Err(); err != nil {
			return &Unready{Reason: err.Error()}
		}
		return nil
	}
}

// Handler serves /metrics from g, /healthz (the process answers) and
// /readyz (ready answers nil within ReadyTimeout; for the worker: SendGrid
// not refusing our key, Temporal and PostgreSQL reachable). A not-ready
// answer is 503 with the *Unready's Reason as its body, or only "not
// ready" for any other error: never a driver's text. However many probes
// call at once, one check runs at a time and the callers waiting share its
// answer, so probes cannot take connections from the deliveries.
func Handler(g prometheus.Gatherer, ready func(context.Context) error) http.Handler {
	var checks singleflight.Group
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		answer := checks.DoChan("ready", func() (any, error) {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), ReadyTimeout)
			defer cancel()
			return nil, ready(ctx)
		})
		var err error
		select {
		case res := <-answer:
			err = res.Err
		case <-r.Context().Done():
			return
		}
		if err != nil {
			reason := "not ready"
			if u := (*Unready)(nil); errors.As(err, &u) {
				reason += ": " + u.Reason
			}
			http.Error(w, reason, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	return mux
}

// NewServer is the ops server for h, with timeouts.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ServerReadHeaderTimeout,
		ReadTimeout:       ServerReadTimeout,
		WriteTimeout:      ServerWriteTimeout,
		IdleTimeout:       ServerIdleTimeout,
	}
}
