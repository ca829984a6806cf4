package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/slicemeter/slicemeter/internal/usage"
)

// jwksServer serves a key set that the test changes, counting requests; down answers 503.
type jwksServer struct {
	mu       sync.Mutex
	body     []byte
	down     bool
	requests atomic.Int64
}

func (s *jwksServer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s.requests.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write(s.body)
}

func (s *jwksServer) set(body []byte, down bool) {
	s.mu.Lock()
	s.body, s.down = body, down
	s.mu.Unlock()
}

func ecJWKS(t *testing.T, keys map[string]*ecdsa.PrivateKey) []byte {
	t.Helper()
	var set []map[string]string
	for kid, k := range keys {
		set = append(set, map[string]string{"kty": "EC", "kid": kid, "crv": "P-256", "x": b64(pad(k.X, 32)), "y": b64(pad(k.Y, 32))})
	}
	b, err := json.Marshal(map[string]any{"keys": set})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestJWKSURL: keys come from the provider's URL; a rotated key is fetched when a token names
// it, at most once a minFetch; a provider down at start does not stop the service, and its keys
// are used once it answers; a key set read before stays when a fetch fails.
func TestJWKSURL(t *testing.T) {
	k1, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	k2, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srv := &jwksServer{}
	srv.set(nil, true)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	a, err := Parse("auth.yaml", []byte("jwt:\n  jwks_url: "+ts.URL+"/jwks\n  issuer: https://id.example\n  audience: slicemeter\n"))
	if err != nil {
		t.Fatalf("a provider down at start must not refuse the auth file: %v", err)
	}
	v := a.jwt
	sign := func(kid string, key *ecdsa.PrivateKey) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": "https://id.example", "aud": "slicemeter", "sub": "u", "exp": time.Now().Add(time.Hour).Unix(), "role": "finance"})
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	verify := func(tok string) error {
		_, err := a.Principal(request("Bearer " + tok))
		return err
	}

	// Down: refused, naming the URL; made-up kids cause no fetch within minFetch.
	if err := verify(sign("k1", k1)); err == nil || !strings.Contains(err.Error(), ts.URL) {
		t.Fatalf("with the provider down: %v, want a refusal naming %s", err, ts.URL)
	}
	before := srv.requests.Load()
	for range 20 {
		_ = verify(sign("made-up", k1))
	}
	if got := srv.requests.Load(); got != before {
		t.Errorf("%d fetches for 20 unknown kids within a minute; want none", got-before)
	}

	// Up: the next unknown kid after minFetch fetches.
	srv.set(ecJWKS(t, map[string]*ecdsa.PrivateKey{"k1": k1}), false)
	v.minFetch = 0
	if err := verify(sign("k1", k1)); err != nil {
		t.Fatalf("after the provider is up: %v", err)
	}
	// Rotation: k2 appears at the provider and is fetched on first use.
	srv.set(ecJWKS(t, map[string]*ecdsa.PrivateKey{"k1": k1, "k2": k2}), false)
	before = srv.requests.Load()
	if err := verify(sign("k2", k2)); err != nil {
		t.Fatalf("rotated key: %v", err)
	}
	if got := srv.requests.Load() - before; got != 1 {
		t.Errorf("%d fetches for the rotated key; want 1", got)
	}
	// A known kid causes no fetch while the set is fresh.
	before = srv.requests.Load()
	for range 5 {
		if err := verify(sign("k1", k1)); err != nil {
			t.Fatal(err)
		}
	}
	if got := srv.requests.Load() - before; got != 0 {
		t.Errorf("%d fetches for a known key; want 0", got)
	}
	// A bad answer keeps the keys read before.
	srv.set([]byte("<html>oops</html>"), false)
	_ = verify(sign("k3", k1))
	if err := verify(sign("k2", k2)); err != nil {
		t.Errorf("after a bad answer the keys read before must stay: %v", err)
	}
	// Stale: a known kid refreshes in the background (once).
	srv.set(ecJWKS(t, map[string]*ecdsa.PrivateKey{"k2": k2}), false)
	v.cfg.Refresh = time.Nanosecond
	before = srv.requests.Load()
	if err := verify(sign("k2", k2)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for srv.requests.Load() == before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if srv.requests.Load() == before {
		t.Error("a stale key set was not fetched again")
	}
}

func TestJWKSURLParseErrors(t *testing.T) {
	for _, tt := range []struct{ name, jwt, want string }{
		{"http to a remote host", "jwks_url: http://id.example/jwks", `jwt.jwks_url: "http://id.example/jwks"; expected an https URL`},
		{"user info", "jwks_url: https://u:p@id.example/jwks", "without user information"},
		{"not a URL", "jwks_url: ftp://id.example/jwks", "expected an https URL"},
		{"file and URL", "jwks_file: j.json\n  jwks_url: https://id.example/jwks", "both jwks_file and jwks_url"},
		{"refresh too short", "jwks_url: https://id.example/jwks\n  jwks_refresh: 10s", `jwt.jwks_refresh: "10s"; expected a duration of at least 1m`},
		{"refresh without URL", "jwks_file: j.json\n  jwks_refresh: 5m", "jwks_refresh only with jwks_url"},
		{"neither", "issuer2: x", "jwt.jwks_file: missing"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("auth.yaml", []byte("jwt:\n  "+tt.jwt+"\n  issuer: i\n  audience: a\n"))
			if err == nil || !usage.Is(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want a usage error with %q", err, tt.want)
			}
		})
	}
}
