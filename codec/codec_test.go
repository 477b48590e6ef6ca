package codec_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/shipnotify/shipnotify/codec"
)

func newCodec(t *testing.T, spec string) *codec.Codec {
	t.Helper()
	keys, err := codec.ParseKeys(strings.NewReader(spec))
	require.NoError(t, err)
	c, err := codec.New(keys, codec.Options{})
	require.NoError(t, err)
	return c
}

func payloads(t *testing.T, values ...any) []*commonpb.Payload {
	t.Helper()
	ps, err := converter.GetDefaultDataConverter().ToPayloads(values...)
	require.NoError(t, err)
	return ps.GetPayloads()
}

const secretText = "ops@shipper.example"

func TestRoundTripHidesThePlainText(t *testing.T) {
	t.Parallel()
	c := newCodec(t, codec.NewKey("k1"))
	plain := payloads(t, map[string]string{"email": secretText})
	sealed, err := c.Encode(plain)
	require.NoError(t, err)
	require.Equal(t, codec.Encoding, string(sealed[0].Metadata[converter.MetadataEncoding]))
	require.Equal(t, "k1", string(sealed[0].Metadata[codec.MetadataKeyID]))
	require.NotContains(t, string(sealed[0].Data), secretText)
	require.NotContains(t, string(sealed[0].Data), "json/plain", "the inner metadata is sealed too")

	opened, err := c.Decode(sealed)
	require.NoError(t, err)
	require.Equal(t, plain[0].Data, opened[0].Data)
	require.Equal(t, plain[0].Metadata, opened[0].Metadata)

	again, err := c.Encode(plain)
	require.NoError(t, err)
	require.NotEqual(t, sealed[0].Data, again[0].Data, "a fresh nonce every time")
}

func TestKeyRotation(t *testing.T) {
	t.Parallel()
	oldKey, newKey := codec.NewKey("old"), codec.NewKey("new")
	before := newCodec(t, oldKey)
	sealedBefore, err := before.Encode(payloads(t, "x"))
	require.NoError(t, err)

	after := newCodec(t, newKey+"\n"+oldKey)
	_, err = after.Decode(sealedBefore)
	require.NoError(t, err, "payloads sealed with the old key still open")
	sealedAfter, err := after.Encode(payloads(t, "y"))
	require.NoError(t, err)
	require.Equal(t, "new", string(sealedAfter[0].Metadata[codec.MetadataKeyID]), "the first key seals")

	_, err = before.Decode(sealedAfter)
	require.ErrorContains(t, err, `unknown key "new"`)
}

func TestTamperingAndWrongKeysAreRefused(t *testing.T) {
	t.Parallel()
	c := newCodec(t, codec.NewKey("k1"))
	sealed, err := c.Encode(payloads(t, "x"))
	require.NoError(t, err)
	sealed[0].Data[len(sealed[0].Data)-1] ^= 1
	_, err = c.Decode(sealed)
	require.Error(t, err)

	impostor := newCodec(t, codec.NewKey("k1")) // same id, other key
	sealed, err = c.Encode(payloads(t, "x"))
	require.NoError(t, err)
	_, err = impostor.Decode(sealed)
	require.Error(t, err)
}

// While encryption is on, a payload that is not sealed is refused, alone
// or beside sealed ones, by the codec and so by the worker's data
// converter: a plaintext input or signal sent without the codec cannot
// pass for ours. Only an explicit allowance (histories from before
// encryption) lets it through, unchanged.
func TestUnsealedPayloadsAreRefusedUnlessAllowed(t *testing.T) {
	t.Parallel()
	key := codec.NewKey("k1")
	c := newCodec(t, key)
	plain := payloads(t, "forged input")
	sealed, err := c.Encode(payloads(t, "ours"))
	require.NoError(t, err)

	_, err = c.Decode(plain)
	require.ErrorIs(t, err, codec.ErrUnsealed)
	_, err = c.Decode(append(sealed, plain...))
	require.ErrorIs(t, err, codec.ErrUnsealed, "not slipped in beside a sealed one")
	var got string
	require.ErrorIs(t, c.DataConverter().FromPayload(plain[0], &got), codec.ErrUnsealed, "the worker's converter refuses it")
	require.NoError(t, c.DataConverter().FromPayload(sealed[0], &got))
	require.Equal(t, "ours", got)

	keys, err := codec.ParseKeys(strings.NewReader(key))
	require.NoError(t, err)
	migrating, err := codec.New(keys, codec.Options{AllowUnsealed: true})
	require.NoError(t, err)
	out, err := migrating.Decode(append(sealed, plain...))
	require.NoError(t, err)
	require.Equal(t, plain[0], out[1], "allowed: passed through unchanged")
	require.NoError(t, migrating.DataConverter().FromPayload(plain[0], &got))
	require.Equal(t, "forged input", got)
}

func TestParseKeys(t *testing.T) {
	t.Parallel()
	keys, err := codec.ParseKeys(strings.NewReader("# current first\n" + codec.NewKey("a") + "\n" + codec.NewKey("b") + "," + codec.NewKey("c")))
	require.NoError(t, err)
	require.Len(t, keys, 3)
	require.Equal(t, "a", keys[0].ID)
	for _, bad := range []string{"", "nokey", "k1:not-base64!", "k1:c2hvcnQ=", "bad id:" + strings.Repeat("A", 44)} {
		_, err := codec.ParseKeys(strings.NewReader(bad))
		require.Error(t, err, bad)
	}
	_, err = codec.New([]codec.Key{keys[0], keys[0]}, codec.Options{})
	require.ErrorContains(t, err, "twice")
}

// The codec server speaks Temporal's remote codec protocol: the SDK's own
// remote codec client decodes through it.
func TestCodecServer(t *testing.T) {
	t.Parallel()
	c := newCodec(t, codec.NewKey("k1"))
	srv := httptest.NewServer(c.Handler(codec.ServerOptions{Origins: []string{"http://localhost:8233"}, Token: "s3cret"}))
	defer srv.Close()
	sealed, err := c.Encode(payloads(t, secretText))
	require.NoError(t, err)

	remote := converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{
		Endpoint: srv.URL,
		ModifyRequest: func(r *http.Request) error {
			r.Header.Set("Authorization", "Bearer s3cret")
			return nil
		},
	})
	opened, err := remote.Decode(sealed)
	require.NoError(t, err)
	var got string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(opened[0], &got))
	require.Equal(t, secretText, got)
	resealed, err := remote.Encode(opened)
	require.NoError(t, err)
	require.Equal(t, codec.Encoding, string(resealed[0].Metadata[converter.MetadataEncoding]))

	// Without the token, or with a wrong one: refused.
	for _, auth := range []string{"", "Bearer s3cre", "Bearer s3cret2", "s3cret"} {
		anon := converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{Endpoint: srv.URL,
			ModifyRequest: func(r *http.Request) error { r.Header.Set("Authorization", auth); return nil }})
		_, err = anon.Decode(sealed)
		require.ErrorContains(t, err, "Unauthorized", auth)
	}

	// A plaintext payload is refused beside sealed ones.
	_, err = remote.Decode(append(sealed, payloads(t, "forged")...))
	require.ErrorContains(t, err, "not encrypted")

	// CORS: the Web UI's origin may ask; another origin gets no grant.
	for origin, granted := range map[string]bool{"http://localhost:8233": true, "https://evil.example": false} {
		req, _ := http.NewRequest(http.MethodOptions, srv.URL+"/decode", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
		if granted {
			require.Equal(t, origin, resp.Header.Get("Access-Control-Allow-Origin"))
			require.Contains(t, resp.Header.Get("Access-Control-Allow-Headers"), "X-Namespace")
		} else {
			require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	}
}

// post sends body to url's /decode with the token and the given Host and
// Content-Type, and returns the status (0 if no answer came). It does not
// fail the test, so goroutines and conditions can call it.
func post(url, host, contentType string, body io.Reader) int {
	req, err := http.NewRequest(http.MethodPost, url+"/decode", body)
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer s3cret")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// decodeBody is a /decode request body of sealed payloads.
func decodeBody(t *testing.T, c *codec.Codec) string {
	t.Helper()
	sealed, err := c.Encode(payloads(t, secretText))
	require.NoError(t, err)
	b, err := protojson.Marshal(&commonpb.Payloads{Payloads: sealed})
	require.NoError(t, err)
	return string(b)
}

// The codec server answers only requests naming a Host it is reached by
// (loopback names, its listen host, the configured names), so a page that
// rebinds its own name to our address gets nothing; only application/json
// (which a browser sends only after a CORS preflight); and bodies of at
// most 4 MiB.
func TestCodecServerRefusesForeignHostsTypesAndSizes(t *testing.T) {
	t.Parallel()
	c := newCodec(t, codec.NewKey("k1"))
	srv := httptest.NewServer(c.Handler(codec.ServerOptions{Token: "s3cret", Hosts: []string{"codec.internal", "Decode.Example:8081"}}))
	defer srv.Close()
	body := decodeBody(t, c)
	for host, want := range map[string]int{
		"":                        http.StatusOK, // 127.0.0.1:port
		"localhost:8081":          http.StatusOK,
		"[::1]:8081":              http.StatusOK,
		"127.0.0.2":               http.StatusOK,
		"codec.internal:8081":     http.StatusOK,
		"CODEC.internal":          http.StatusOK,
		"decode.example":          http.StatusOK,
		"evil.example:8081":       http.StatusMisdirectedRequest,
		"localhost.evil.example":  http.StatusMisdirectedRequest,
		"codec.internal.evil.com": http.StatusMisdirectedRequest,
		"10.0.0.5:8081":           http.StatusMisdirectedRequest,
	} {
		require.Equal(t, want, post(srv.URL, host, "application/json", strings.NewReader(body)), "Host: %q", host)
	}
	for ct, want := range map[string]int{
		"application/json":                  http.StatusOK,
		"application/json; charset=utf-8":   http.StatusOK,
		"":                                  http.StatusUnsupportedMediaType,
		"text/plain":                        http.StatusUnsupportedMediaType,
		"application/x-www-form-urlencoded": http.StatusUnsupportedMediaType,
		"multipart/form-data; boundary=x":   http.StatusUnsupportedMediaType,
	} {
		require.Equal(t, want, post(srv.URL, "", ct, strings.NewReader(body)), "Content-Type: %q", ct)
	}
	big := bytes.Repeat([]byte(" "), codec.MaxRequestBytes+1)
	require.Equal(t, http.StatusRequestEntityTooLarge, post(srv.URL, "", "application/json", bytes.NewReader(big)),
		"an oversized body with its length is refused up front")
	require.Equal(t, http.StatusBadRequest, post(srv.URL, "", "application/json", io.MultiReader(bytes.NewReader(big))),
		"an oversized chunked body is cut off at the cap")
	require.Equal(t, http.StatusOK, post(srv.URL, "", "application/json",
		strings.NewReader(body+strings.Repeat(" ", codec.MaxRequestBytes-len(body)))), "exactly at the cap")
}

// The codec server serves a bounded number of requests at once; one more
// waits, then is answered 503, and is served once a slot frees.
func TestCodecServerBoundsConcurrency(t *testing.T) {
	t.Parallel()
	c := newCodec(t, codec.NewKey("k1"))
	srv := httptest.NewServer(c.Handler(codec.ServerOptions{Token: "s3cret", MaxConcurrent: 1, QueueWait: 20 * time.Millisecond}))
	defer srv.Close()
	body := decodeBody(t, c)

	// The first request holds the only slot while its body trickles in.
	pr, pw := io.Pipe()
	defer pw.Close() // before srv.Close, which waits for the request
	first := make(chan int, 1)
	go func() { first <- post(srv.URL, "", "application/json", pr) }()
	_, err := pw.Write([]byte(body[:10]))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return post(srv.URL, "", "application/json", strings.NewReader(body)) == http.StatusServiceUnavailable
	}, 10*time.Second, time.Millisecond, "a second request finds no slot")

	_, err = pw.Write([]byte(body[10:]))
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	require.Equal(t, http.StatusOK, <-first)
	require.Equal(t, http.StatusOK, post(srv.URL, "", "application/json", strings.NewReader(body)))
}

// The codec server refuses to start without a token: whoever reaches it
// could decrypt every history, and encrypt payloads a worker takes as
// ours. On loopback (only) a development setup may waive it, by name.
func TestCodecServerRequiresAToken(t *testing.T) {
	t.Parallel()
	c := newCodec(t, codec.NewKey("k1"))
	for addr, loopback := range map[string]bool{
		"127.0.0.1:8081": true, "localhost:8081": true, "[::1]:8081": true, "127.0.0.53:0": true,
		"0.0.0.0:8081": false, ":8081": false, "[::]:8081": false, "10.0.0.5:8081": false, "codec.internal:8081": false,
	} {
		_, err := c.Server(addr, codec.ServerOptions{})
		require.ErrorIs(t, err, codec.ErrTokenRequired, "%s: no token, no waiver", addr)
		_, err = c.Server(addr, codec.ServerOptions{InsecureLoopback: true})
		if loopback {
			require.NoError(t, err, addr)
		} else {
			require.ErrorIs(t, err, codec.ErrTokenRequired, "%s: the waiver is for loopback only", addr)
		}
		_, err = c.Server(addr, codec.ServerOptions{Token: "s3cret"})
		require.NoError(t, err, addr)
	}
}

// The codec server's http.Server bounds how long a client may take to send
// headers and body, to read the answer, and to sit idle.
func TestCodecServerHasTimeouts(t *testing.T) {
	t.Parallel()
	srv, err := newCodec(t, codec.NewKey("k1")).Server("127.0.0.1:0", codec.ServerOptions{Token: "s3cret"})
	require.NoError(t, err)
	for name, d := range map[string]time.Duration{
		"ReadHeaderTimeout": srv.ReadHeaderTimeout, "ReadTimeout": srv.ReadTimeout,
		"WriteTimeout": srv.WriteTimeout, "IdleTimeout": srv.IdleTimeout,
	} {
		require.Positive(t, d, name)
	}
}

// A probe names the pod's address as Host, which the codec refuses; the
// server's /healthz answers it (and says nothing but that it serves),
// while /decode from that Host stays refused.
func TestCodecServerAnswersProbesFromAnyHost(t *testing.T) {
	t.Parallel()
	c := newCodec(t, codec.NewKey("k1"))
	srv, err := c.Server("127.0.0.1:0", codec.ServerOptions{Token: "s3cret"})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	url := "http://" + ln.Addr().String()

	req, err := http.NewRequest(http.MethodGet, url+"/healthz", nil)
	require.NoError(t, err)
	req.Host = "10.0.0.5:8081"
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "ok\n", string(body))

	require.Equal(t, http.StatusMisdirectedRequest, post(url, "10.0.0.5:8081", "application/json", strings.NewReader(decodeBody(t, c))),
		"the codec itself still refuses that Host")
	require.Equal(t, http.StatusOK, post(url, "", "application/json", strings.NewReader(decodeBody(t, c))))
}

// The Web UI cannot send a fixed token, only the browser's cookies
// (TEMPORAL_CODEC_INCLUDE_CREDENTIALS): a person signs in once at /login
// with the token, and the cookie it sets lets the UI's origin decode. The
// cookie is HttpOnly and SameSite=Strict and does not carry the token; a
// wrong token sets nothing, and a made-up cookie opens nothing.
func TestCodecServerBrowserLogin(t *testing.T) {
	t.Parallel()
	c := newCodec(t, codec.NewKey("k1"))
	const origin = "http://localhost:8233"
	srv := httptest.NewServer(c.Handler(codec.ServerOptions{Origins: []string{origin}, Token: "s3cret"}))
	defer srv.Close()

	resp, err := http.Get(srv.URL + codec.LoginPath)
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(page), `name="token"`)
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'")

	signIn := func(token string) *http.Response {
		resp, err := http.PostForm(srv.URL+codec.LoginPath, url.Values{"token": {token}})
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	bad := signIn("s3cre")
	require.Equal(t, http.StatusUnauthorized, bad.StatusCode)
	require.Empty(t, bad.Cookies(), "a wrong token sets no cookie")

	good := signIn("s3cret")
	require.Equal(t, http.StatusOK, good.StatusCode)
	require.Len(t, good.Cookies(), 1)
	cookie := good.Cookies()[0]
	require.Equal(t, codec.CookieName, cookie.Name)
	require.True(t, cookie.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, cookie.SameSite)
	require.NotContains(t, cookie.Value, "s3cret", "the cookie stands for the token without carrying it")

	for name, ck := range map[string]*http.Cookie{"signed in": cookie, "made up": {Name: codec.CookieName, Value: strings.Repeat("0", 64)}, "none": nil} {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/decode", strings.NewReader(decodeBody(t, c)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", origin)
		req.Header.Set("X-Namespace", "default")
		if ck != nil {
			req.AddCookie(ck)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ck != cookie {
			require.Equal(t, http.StatusUnauthorized, resp.StatusCode, name)
			continue
		}
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", name, body)
		require.Equal(t, origin, resp.Header.Get("Access-Control-Allow-Origin"))
		require.Equal(t, "true", resp.Header.Get("Access-Control-Allow-Credentials"), "the browser hands the UI an answer to a request with cookies")
		var out commonpb.Payloads
		require.NoError(t, protojson.Unmarshal(body, &out))
		var got string
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(out.Payloads[0], &got))
		require.Equal(t, secretText, got)
	}
}
