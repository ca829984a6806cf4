package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
)

// TestAPIJWTWithoutSub: through the real binary, a JWT signed by a key of the auth file's
// JWKS is served when it has a subject, and refused with 401 naming the claim sub when it has
// none (or an empty one): every caller is named in the audit trail, never as a bare "jwt:".
func TestAPIJWTWithoutSub(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b64 := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	jwks, err := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "EC", "kid": "k1", "crv": "P-256",
		"x": b64(key.X.FillBytes(make([]byte, 32))), "y": b64(key.Y.FillBytes(make([]byte, 32)))}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "jwks.json"), jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	authFile := filepath.Join(dir, "auth.yaml")
	if err := os.WriteFile(authFile, []byte("jwt:\n  jwks_file: jwks.json\n  issuer: https://id.example/\n  audience: slicemeter\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db := localtest.Database(t, localtest.DatabaseOptions{})
	svc := apptest.StartAttribution(t, ctx, "--api.auth-file", authFile, "--clickhouse.dsn", db.DSN,
		"--scenario", filepath.Join(scenarios, "mig-basic.yaml"))
	sign := func(sub any) string {
		c := jwt.MapClaims{"iss": "https://id.example/", "aud": "slicemeter", "exp": time.Now().Add(time.Hour).Unix(), "role": "finance"}
		if sub != nil {
			c["sub"] = sub
		}
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, c)
		tok.Header["kid"] = "k1"
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tt := range []struct {
		name string
		sub  any
		code int
		has  string
	}{
		{"with sub", "alice", http.StatusOK, ""},
		{"without sub", nil, http.StatusUnauthorized, "no claim sub"},
		{"empty sub", "", http.StatusUnauthorized, "no claim sub"},
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, svc.URL("/api/v1/allocations"), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+sign(tt.sub))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.code || !strings.Contains(string(body), tt.has) {
			t.Errorf("%s: %d %s; want %d naming %q", tt.name, resp.StatusCode, body, tt.code, tt.has)
		}
	}
}
