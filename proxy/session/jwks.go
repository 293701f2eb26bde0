package session

import (
	"encoding/base64"
	"encoding/json"
)

// jwk is one public key of the JWKS document (RFC 8037: an OKP key).
type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
}

// JWKS is the document served at /.well-known/jwks.json: the Ed25519
// public key, or no key at all when sessions are signed with an HS256
// secret (which is never published) or not signed.
func (t *Tokens) JWKS() []byte {
	keys := []jwk{}
	if t.pub != nil {
		keys = append(keys, jwk{Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(t.pub),
			Kid: t.kid, Alg: "EdDSA", Use: "sig"})
	}
	body, _ := json.Marshal(map[string]any{"keys": keys})
	return body
}
