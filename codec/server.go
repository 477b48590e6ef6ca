package codec

import (
	"crypto/subtle"
	"net/http"
	"slices"
	"time"

	"go.temporal.io/sdk/converter"
)

// ServerOptions configure the codec server.
type ServerOptions struct {
	// Origins may call the server from a browser (the Temporal Web UI's
	// origin, e.g. http://localhost:8233).
	Origins []string
	// Token, when set, must come as "Authorization: Bearer <token>".
	Token string
}

// Handler serves /encode and /decode for the Temporal Web UI and CLI
// (Temporal's remote codec protocol), with CORS for the UI's origin and an
// optional bearer token. Request bodies are capped.
func (c *Codec) Handler(o ServerOptions) http.Handler {
	codec := converter.NewPayloadCodecHTTPHandler(c)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && slices.Contains(o.Origins, origin) {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
			h.Set("Access-Control-Max-Age", "600")
			h.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if o.Token != "" {
			want := "Bearer " + o.Token
			if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte(want)) != 1 {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		r.Body = http.MaxBytesReader(w, r.Body, 8<<20)
		codec.ServeHTTP(w, r)
	})
}

// Server is an HTTP server for Handler with sensible timeouts.
func (c *Codec) Server(addr string, o ServerOptions) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           c.Handler(o),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
	}
}
