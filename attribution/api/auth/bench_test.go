package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/crypto/bcrypt"
)

// BenchmarkPrincipal is what authentication adds to a request: a static token already
// verified (the cache), one checked with bcrypt at HashCost (first use, or a wrong token
// against one entry), and an ES256 JWT.
func BenchmarkPrincipal(b *testing.B) {
	const token = "bench-0123456789abcdef"
	h, _ := bcrypt.GenerateFromPassword([]byte(token), HashCost)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "EC", "kid": "e", "crv": "P-256", "x": b64(pad(key.X, 32)), "y": b64(pad(key.Y, 32))}}})
	file := filepath.Join(b.TempDir(), "jwks.json")
	if err := os.WriteFile(file, jwks, 0o600); err != nil {
		b.Fatal(err)
	}
	v, err := NewJWTVerifier(JWTConfig{JWKSFile: file, Issuer: "i", Audience: "a", RoleClaim: "role", TenantsClaim: "tenants"})
	if err != nil {
		b.Fatal(err)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": "i", "aud": "a", "exp": time.Now().Add(time.Hour).Unix(), "role": "tenant", "tenants": "acme"})
	tok.Header["kid"] = "e"
	signed, _ := tok.SignedString(key)
	a := New([]Token{{Name: "t", Hash: h}}, v)
	for _, bc := range []struct{ name, header string }{
		{"static cached", "Bearer " + token},
		{"static wrong (bcrypt)", "Bearer wrong-0123456789abcdef"},
		{"jwt ES256", "Bearer " + signed},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := request(bc.header)
			_, _ = a.Principal(r) // fills the cache for the valid static token
			for b.Loop() {
				_, _ = a.Principal(r)
			}
		})
	}
}
