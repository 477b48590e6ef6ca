// Package balancer stands in for the load balancer in front of serve's
// replicas: each request goes to the next replica in turn, and to the one
// after it when that replica takes no connection (it was killed), so a
// harness can kill a replica and see the others take its traffic. The
// soak and the horizontal benchmark put the replicas behind it.
package balancer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// requestTimeout bounds one forwarded request.
const requestTimeout = 2 * time.Minute

// maxBody is the largest request body passed on, as serve bounds it.
const maxBody = 8 << 20

// Balancer passes each request to the first replica, in turn from the one
// after the last request's, that takes its connection. A request cut after
// it left is answered 502 and never sent to another replica: it may have
// been done.
type Balancer struct {
	targets []string
	mu      sync.Mutex
	next    int
}

// New balances over the replicas' base URLs (http://host:port).
func New(targets []string) *Balancer { return &Balancer{targets: targets} }

func (b *Balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := readAll(r)
	if err != nil {
		http.Error(w, "could not read the request", http.StatusBadRequest)
		return
	}
	b.mu.Lock()
	first := b.next
	b.next = (b.next + 1) % len(b.targets)
	b.mu.Unlock()
	for i := range b.targets {
		target := b.targets[(first+i)%len(b.targets)]
		ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
		resp, err := forward(ctx, r, target, body)
		if err != nil {
			cancel()
			continue // that replica is down: the next one
		}
		copyResponse(w, resp)
		cancel()
		return
	}
	http.Error(w, "no serve replica answers", http.StatusBadGateway)
}

// readAll reads a request's body, bounded as serve bounds it.
func readAll(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	return io.ReadAll(io.LimitReader(r.Body, maxBody))
}

// errDial is a replica that refused the connection: the request never
// left, so the next replica may take it.
var errDial = errors.New("the replica refused the connection")

// forward sends the request to target and returns its answer; errDial when
// the replica took no connection. A request cut after it left is an answer
// (a 502), never retried elsewhere: it may have been done.
func forward(ctx context.Context, r *http.Request, target string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, r.Method, target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return nil, errDial
	}
	if err != nil {
		return &http.Response{StatusCode: http.StatusBadGateway, Header: http.Header{},
			Body: io.NopCloser(bytes.NewReader([]byte(`{"title":"the replica went away mid-request"}`)))}, nil
	}
	return resp, nil
}

// copyResponse writes resp to w.
func copyResponse(w http.ResponseWriter, resp *http.Response) {
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}
