package soak

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
)

// readAll reads a request's body, bounded as serve bounds it.
func readAll(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	return io.ReadAll(io.LimitReader(r.Body, 8<<20))
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
