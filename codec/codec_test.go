package codec_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/shipnotify/shipnotify/codec"
)

func newCodec(t *testing.T, spec string) *codec.Codec {
	t.Helper()
	keys, err := codec.ParseKeys(strings.NewReader(spec))
	require.NoError(t, err)
	c, err := codec.New(keys)
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

func TestUnencryptedPayloadsPassThrough(t *testing.T) {
	t.Parallel()
	c := newCodec(t, codec.NewKey("k1"))
	plain := payloads(t, "old history")
	out, err := c.Decode(plain)
	require.NoError(t, err)
	require.Equal(t, plain, out)
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
	_, err = codec.New([]codec.Key{keys[0], keys[0]})
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

	// Without the token: refused.
	anon := converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{Endpoint: srv.URL})
	_, err = anon.Decode(sealed)
	require.Error(t, err)

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

	big, _ := http.NewRequest(http.MethodPost, srv.URL+"/decode", bytes.NewReader(make([]byte, 9<<20)))
	big.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(big)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "oversized bodies are refused")
}
