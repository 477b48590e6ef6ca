// Package codec encrypts Temporal payloads with AES-256-GCM, so the
// engine's histories never hold personal data in plain view. Payloads carry
// the id of the key that sealed them; several keys can be configured, the
// first sealing new payloads and all of them opening old ones, so keys
// rotate without breaking running workflows.
//
// It is part of shipnotify's Go contract, with reminder, starter and
// workflows: a Go service's Temporal client uses it to schedule reminders
// (docs/architecture.md, "Where the code lives").
package codec

import (
	"bufio"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"
)

// Metadata of an encrypted payload.
const (
	// Encoding marks a payload sealed by this codec.
	Encoding = "binary/encrypted"
	// MetadataKeyID names the key that sealed it.
	MetadataKeyID = "encryption-key-id"
)

// Key is one AES-256 key and its id.
type Key struct {
	ID     string
	Secret []byte
}

var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ParseKeys reads keys written as "id:base64" separated by commas, spaces or
// newlines (lines starting with # are comments). The first key seals.
func ParseKeys(r io.Reader) ([]Key, error) {
	var keys []Key
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		for _, field := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
			id, b64, ok := strings.Cut(field, ":")
			if !ok || !keyIDPattern.MatchString(id) {
				return nil, errors.New(`want keys as "id:base64" (id: letters, digits, . _ -)`)
			}
			secret, err := base64.StdEncoding.DecodeString(b64)
			if err != nil || len(secret) != 32 {
				return nil, fmt.Errorf("key %q: want 32 bytes of base64 (AES-256)", id)
			}
			keys = append(keys, Key{ID: id, Secret: secret})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, errors.New("no keys")
	}
	return keys, nil
}

// NewKey returns a fresh random key line, "id:base64".
func NewKey(id string) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return id + ":" + base64.StdEncoding.EncodeToString(b)
}

// Codec is a converter.PayloadCodec sealing payloads with AES-256-GCM.
type Codec struct {
	sealID        string
	aeads         map[string]cipher.AEAD
	allowUnsealed bool
}

// Options adjust a codec.
type Options struct {
	// AllowUnsealed lets Decode pass through payloads that are not sealed:
	// the histories of workflows started before encryption was turned on.
	// Off (the default), such a payload is refused (ErrUnsealed), so a
	// plaintext input, signal or update sent without the codec cannot pass
	// for one of ours, in the worker or through the codec server.
	AllowUnsealed bool
}

// ErrUnsealed is Decode refusing a payload this codec did not seal.
var ErrUnsealed = errors.New("codec: refusing a payload that is not encrypted " +
	"(unencrypted payloads are admitted only when explicitly allowed, while histories from before encryption run out)")

// New returns a codec over keys; the first seals new payloads.
func New(keys []Key, o Options) (*Codec, error) {
	if len(keys) == 0 {
		return nil, errors.New("codec: no keys")
	}
	c := &Codec{sealID: keys[0].ID, aeads: make(map[string]cipher.AEAD, len(keys)), allowUnsealed: o.AllowUnsealed}
	for _, k := range keys {
		if _, dup := c.aeads[k.ID]; dup {
			return nil, fmt.Errorf("codec: key id %q given twice", k.ID)
		}
		block, err := aes.NewCipher(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("codec: key %q: %w", k.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("codec: key %q: %w", k.ID, err)
		}
		c.aeads[k.ID] = aead
	}
	return c, nil
}

// Encode seals each payload (its metadata and data, marshalled) with the
// first key; the key id goes in the clear so any holder of the key set can
// open it. The key id is also the additional data, so a payload cannot be
// passed off under another key's id.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	aead := c.aeads[c.sealID]
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("codec: %w", err)
		}
		nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
		if _, err := rand.Read(nonce); err != nil {
			return nil, fmt.Errorf("codec: %w", err)
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				converter.MetadataEncoding: []byte(Encoding),
				MetadataKeyID:              []byte(c.sealID),
			},
			Data: aead.Seal(nonce, nonce, plain, []byte(c.sealID)),
		}
	}
	return out, nil
}

// Decode opens payloads this codec sealed. One that is not sealed is
// refused with ErrUnsealed (wrapped so that a worker fails its workflow
// task rather than the workflow), or passed through as it is when the
// codec allows unsealed payloads (Options.AllowUnsealed).
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != Encoding {
			if !c.allowUnsealed {
				// In a worker this fails the workflow task, not the
				// workflow: the task is retried, so a reminder whose
				// history predates encryption waits for the allowance
				// instead of failing, and a forged start never runs.
				// Elsewhere it is an ordinary error (errors.Is
				// ErrUnsealed).
				return nil, converter.NewWorkflowTaskFailureError(ErrUnsealed)
			}
			out[i] = p
			continue
		}
		id := string(p.GetMetadata()[MetadataKeyID])
		aead, ok := c.aeads[id]
		if !ok {
			return nil, fmt.Errorf("codec: payload sealed with unknown key %q", id)
		}
		data := p.GetData()
		if len(data) < aead.NonceSize() {
			return nil, errors.New("codec: payload too short")
		}
		plain, err := aead.Open(nil, data[:aead.NonceSize()], data[aead.NonceSize():], []byte(id))
		if err != nil {
			return nil, fmt.Errorf("codec: payload sealed with key %q does not open: %w", id, err)
		}
		var decoded commonpb.Payload
		if err := proto.Unmarshal(plain, &decoded); err != nil {
			return nil, fmt.Errorf("codec: %w", err)
		}
		out[i] = &decoded
	}
	return out, nil
}

// DataConverter wraps Temporal's default converter with the codec.
func (c *Codec) DataConverter() converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

// FailureConverter encrypts failure messages and stack traces too: a
// provider's error text can quote what it was sent.
func (c *Codec) FailureConverter() converter.FailureConverter {
	return temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
		DataConverter:          c.DataConverter(),
		EncodeCommonAttributes: true,
	})
}
