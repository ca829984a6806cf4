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

	"github.com/slicemeter/slicemeter/internal/faillimit"
)

// BenchmarkPrincipal is what authentication adds to a request: a static token already
// verified (the cache), a wrong one refused by its lookup key, one checked with bcrypt at
// HashCost (a wrong token against an entry without a lookup key), and an ES256 JWT.
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
	keyed := New([]Token{{Name: "t", Hash: h, Lookup: LookupKey(token), Keyed: true}}, v)
	legacy := New([]Token{{Name: "t", Hash: h}}, v)
	// The limit of failures per address would answer the legacy case's wrong tokens 429
	// without bcrypt: a clock that refills it at every call keeps measuring the comparison.
	at := time.Now()
	legacy.failures.Now = func() time.Time { at = at.Add(faillimit.Refill); return at }
	for _, bc := range []struct {
		name, header string
		a            *Authenticator
	}{
		{"static cached", "Bearer " + token, keyed},
		{"static wrong (lookup key: one hash)", "Bearer wrong-0123456789abcdef", keyed},
		{"static wrong (entry without lookup key: bcrypt)", "Bearer wrong-0123456789abcdef", legacy},
		{"jwt ES256", "Bearer " + signed, keyed},
	} {
		a := bc.a
		b.Run(bc.name, func(b *testing.B) {
			r := request(bc.header)
			_, _ = a.Principal(r) // fills the cache for the valid static token
			for b.Loop() {
				_, _ = a.Principal(r)
			}
		})
	}
}
