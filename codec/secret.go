package codec

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// sealedPrefix marks a secret SealSecret sealed: "sealed:v1:<key id>:<base64
// of nonce and ciphertext>". Anything else is a secret stored before
// sealing was turned on.
const sealedPrefix = "sealed:v1:"

// SealSecret encrypts a secret kept at rest (a webhook's signing secret in
// the mirror) with the sealing key. owner binds it to the row that holds it
// (the reminder id), so a sealed value copied onto another row does not
// open there.
func (c *Codec) SealSecret(secret, owner string) (string, error) {
	aead := c.aeads[c.sealID]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(secret)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("codec: %w", err)
	}
	sealed := aead.Seal(nonce, nonce, []byte(secret), secretAD(c.sealID, owner))
	return sealedPrefix + c.sealID + ":" + base64.RawStdEncoding.EncodeToString(sealed), nil
}

// OpenSecret returns the secret SealSecret sealed for owner, with whichever
// configured key sealed it. A value that was never sealed (stored before
// sealing was turned on) comes back as it is; ResealNeeded says so.
func (c *Codec) OpenSecret(stored, owner string) (string, error) {
	if !strings.HasPrefix(stored, sealedPrefix) {
		return stored, nil
	}
	id, data, ok := strings.Cut(strings.TrimPrefix(stored, sealedPrefix), ":")
	if !ok {
		return "", errors.New("codec: malformed sealed secret")
	}
	aead, ok := c.aeads[id]
	if !ok {
		return "", fmt.Errorf("codec: secret sealed with unknown key %q", id)
	}
	raw, err := base64.RawStdEncoding.DecodeString(data)
	if err != nil || len(raw) < aead.NonceSize() {
		return "", errors.New("codec: malformed sealed secret")
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], secretAD(id, owner))
	if err != nil {
		return "", fmt.Errorf("codec: secret sealed with key %q does not open for its row", id)
	}
	return string(plain), nil
}

// ResealNeeded reports whether a stored secret is not sealed with the
// current sealing key: stored in the clear, or sealed with a key being
// rotated out.
func (c *Codec) ResealNeeded(stored string) bool {
	return !strings.HasPrefix(stored, sealedPrefix+c.sealID+":")
}

func secretAD(keyID, owner string) []byte {
	return []byte("shipnotify secret|" + keyID + "|" + owner)
}
