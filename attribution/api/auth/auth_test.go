package auth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/crypto/bcrypt"

	"github.com/slicemeter/slicemeter/attribution/api"
	"github.com/slicemeter/slicemeter/internal/usage"
)

func hash(t *testing.T, token string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(token), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

func request(authorization string) *http.Request {
	r, _ := http.NewRequest("GET", "/api/v1/report", nil)
	if authorization != "" {
		r.Header.Set("Authorization", authorization)
	}
	return r
}

func TestParseErrors(t *testing.T) {
	h := "\"" + hash(t, "0123456789abcdef") + "\""
	tests := []struct {
		name, yaml string
		want       []string // in the error, every one
	}{
		{"empty", "", []string{"auth.yaml: the file is empty"}},
		{"not yaml", "tokens: [", []string{"auth.yaml: not YAML"}},
		{"nothing", "{}", []string{"auth.yaml:1: neither tokens nor jwt"}},
		{"unknown top field", "tokens: []\nusers: []", []string{"auth.yaml:2: users: an unknown field"}},
		{"tokens not a list", "tokens: x", []string{"auth.yaml:1: tokens: \"x\"; expected a list of tokens"}},
		{"missing fields", "tokens:\n  - name: a\n", []string{"auth.yaml:2: tokens[0].hash: missing", "auth.yaml:2: tokens[0].role: missing"}},
		{"plain token as hash", "tokens:\n  - name: a\n    hash: secret-token-value\n    role: operator\n",
			[]string{"auth.yaml:3: tokens[0].hash: not a bcrypt hash", "never the token itself"}},
		{"bad role", "tokens:\n  - name: a\n    hash: " + h + "\n    role: admin\n",
			[]string{`auth.yaml:4: tokens[0].role: "admin"; expected one of operator, finance, scheduler, tenant`}},
		{"tenant without tenants", "tokens:\n  - name: a\n    hash: " + h + "\n    role: tenant\n",
			[]string{"auth.yaml:2: tokens[0].tenants: missing"}},
		{"operator with tenants", "tokens:\n  - name: a\n    hash: " + h + "\n    role: operator\n    tenants: [acme]\n",
			[]string{"auth.yaml:2: tokens[0].tenants: acme; expected no tenants for role operator"}},
		{"bad tenant name", "tokens:\n  - name: a\n    hash: " + h + "\n    role: tenant\n    tenants: [acme, __unallocated__]\n",
			[]string{`auth.yaml:5: tokens[0].tenants[1]: "__unallocated__"`}},
		{"duplicate name", "tokens:\n  - {name: a, hash: " + h + ", role: finance}\n  - {name: a, hash: " + h + ", role: finance}\n",
			[]string{`auth.yaml:3: tokens[1].name: "a" again`}},
		{"unknown token field", "tokens:\n  - {name: a, hash: " + h + ", role: finance, token: x}\n",
			[]string{"auth.yaml:2: tokens[0].token: an unknown field"}},
		{"lookup not hex", "tokens:\n  - {name: a, hash: " + h + ", lookup: 0123456z, role: finance}\n",
			[]string{`auth.yaml:2: tokens[0].lookup: "0123456z"; expected the 8 hex digits`}},
		{"lookup too short", "tokens:\n  - {name: a, hash: " + h + ", lookup: \"12\", role: finance}\n",
			[]string{`auth.yaml:2: tokens[0].lookup: "12"`}},
		{"jwt missing", "jwt:\n  issuer: x\n", []string{"auth.yaml:2: jwt.jwks_file: missing", "jwt.audience: missing"}},
		{"jwt no file", "jwt: {jwks_file: nowhere.json, issuer: i, audience: a}\n", []string{"auth.yaml:1: jwt.jwks_file: open", "nowhere.json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("auth.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			if !usage.Is(err) {
				t.Errorf("%v: not a usage error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestStaticTokens(t *testing.T) {
	file := fmt.Sprintf(`tokens:
  - {name: ops, hash: %q, role: operator}
  - {name: acme-dash, hash: %q, role: tenant, tenants: [acme]}
  - {name: slurm, hash: %q, role: scheduler, tenants: [acme, beta]}
  - {name: books, hash: %q, role: finance}
`, hash(t, "ops-token-0123456789"), hash(t, "acme-token-0123456789"), hash(t, "slurm-token-0123456789"), hash(t, "books-token-0123456789"))
	a, err := Parse("auth.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, header string
		want         api.Principal
		err          string
	}{
		{"operator", "Bearer ops-token-0123456789", api.Principal{Name: "ops", Role: api.RoleOperator}, ""},
		{"tenant", "Bearer acme-token-0123456789", api.Principal{Name: "acme-dash", Role: api.RoleTenant, Tenants: []string{"acme"}}, ""},
		{"scheduler", "bearer  slurm-token-0123456789", api.Principal{Name: "slurm", Role: api.RoleScheduler, Tenants: []string{"acme", "beta"}}, ""},
		{"finance", "Bearer books-token-0123456789", api.Principal{Name: "books", Role: api.RoleFinance}, ""},
		{"no header", "", api.Principal{}, "no bearer token"},
		{"basic", "Basic b3BzOnB3", api.Principal{}, `the scheme "Basic"; expected Bearer TOKEN`},
		{"empty bearer", "Bearer ", api.Principal{}, "Bearer without a token"},
		{"unknown token", "Bearer ops-token-0123456788", api.Principal{}, "not valid"},
		{"a hash as token", "Bearer " + string(a.tokens[0].Hash), api.Principal{}, "not valid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 2 { // the second time from the cache
				p, err := a.Principal(request(tt.header))
				switch {
				case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
					t.Fatalf("error %v, want one naming %q", err, tt.err)
				case tt.err == "" && err != nil:
					t.Fatal(err)
				case p.Name != tt.want.Name || p.Role != tt.want.Role || !slices.Equal(p.Tenants, tt.want.Tenants):
					t.Fatalf("principal %+v, want %+v", p, tt.want)
				}
				if secret := strings.TrimPrefix(tt.header, "Bearer "); err != nil && len(secret) > 8 && strings.Contains(err.Error(), secret) {
					t.Errorf("the error %q names the token", err)
				}
			}
		})
	}
}

// TestHashEntry: what `slicemeter api token hash` prints, with the role filled in, is an auth
// file that admits the token.
func TestHashEntry(t *testing.T) {
	var out bytes.Buffer
	if err := HashEntry(strings.NewReader("a-long-enough-token-value\n"), &out, "ci"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "a-long-enough-token-value") {
		t.Fatalf("the entry holds the token itself:\n%s", out.String())
	}
	a, err := Parse("auth.yaml", []byte("tokens:\n"+strings.Replace(out.String(), "TENANT", "acme", 1)))
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if p, err := a.Principal(request("Bearer a-long-enough-token-value")); err != nil || p.Name != "ci" || p.Role != api.RoleTenant {
		t.Errorf("principal %+v, %v", p, err)
	}
	if !a.tokens[0].Keyed || a.tokens[0].Lookup != LookupKey("a-long-enough-token-value") || a.checks.Load() != 1 {
		t.Errorf("the entry's lookup key %08x (set: %v), %d bcrypt comparisons; want the token's key %08x and 1:\n%s",
			a.tokens[0].Lookup, a.tokens[0].Keyed, a.checks.Load(), LookupKey("a-long-enough-token-value"), out.String())
	}
	for _, short := range []string{"", "short\n"} {
		if err := HashEntry(strings.NewReader(short), &out, "ci"); !usage.Is(err) {
			t.Errorf("token %q: %v, want a usage error", short, err)
		}
	}
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func pad(n *big.Int, size int) []byte { return n.FillBytes(make([]byte, size)) }

// TestJWT: tokens signed by each key type verify; a wrong issuer, audience, key or algorithm,
// an expired token or one without expiry, and claims that map to no principal are refused.
func TestJWT(t *testing.T) {
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	edPub, edKey, _ := ed25519.GenerateKey(rand.Reader)
	otherKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{
		{"kty": "RSA", "kid": "r", "n": b64(rsaKey.N.Bytes()), "e": b64(big.NewInt(int64(rsaKey.E)).Bytes())},
		{"kty": "EC", "kid": "e", "crv": "P-256", "x": b64(pad(ecKey.X, 32)), "y": b64(pad(ecKey.Y, 32))},
		{"kty": "OKP", "kid": "d", "crv": "Ed25519", "x": b64(edPub)},
	}})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "jwks.json"), jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := Parse(filepath.Join(dir, "auth.yaml"), []byte("jwt:\n  jwks_file: jwks.json\n  issuer: https://id.example\n  audience: slicemeter\n  tenants_claim: org\n"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	good := jwt.MapClaims{"iss": "https://id.example", "aud": "slicemeter", "sub": "u1", "exp": now.Add(time.Hour).Unix(), "role": "tenant", "org": "acme"}
	with := func(k string, v any) jwt.MapClaims {
		c := jwt.MapClaims{}
		for key, val := range good {
			c[key] = val
		}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	sign := func(m jwt.SigningMethod, kid string, key any, c jwt.MapClaims) string {
		tok := jwt.NewWithClaims(m, c)
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	rsaPEM := rsaKey.N.Bytes() // an attacker's HMAC secret: the public modulus
	tests := []struct {
		name  string
		token string
		want  api.Principal
		err   string
	}{
		{"RS256", sign(jwt.SigningMethodRS256, "r", rsaKey, good), api.Principal{Name: "jwt:u1", Role: api.RoleTenant, Tenants: []string{"acme"}}, ""},
		{"ES256", sign(jwt.SigningMethodES256, "e", ecKey, with("org", []any{"acme", "beta"})), api.Principal{Name: "jwt:u1", Role: api.RoleTenant, Tenants: []string{"acme", "beta"}}, ""},
		{"EdDSA finance", sign(jwt.SigningMethodEdDSA, "d", edKey, with("role", "finance")), api.Principal{Name: "jwt:u1", Role: api.RoleFinance}, ""},
		{"expired", sign(jwt.SigningMethodES256, "e", ecKey, with("exp", now.Add(-time.Hour).Unix())), api.Principal{}, "expired"},
		{"no expiry", sign(jwt.SigningMethodES256, "e", ecKey, with("exp", nil)), api.Principal{}, "exp claim is required"},
		{"wrong issuer", sign(jwt.SigningMethodES256, "e", ecKey, with("iss", "https://evil.example")), api.Principal{}, "issuer"},
		{"wrong audience", sign(jwt.SigningMethodES256, "e", ecKey, with("aud", "grafana")), api.Principal{}, "audience"},
		{"other key", sign(jwt.SigningMethodES256, "e", otherKey, good), api.Principal{}, "signature is invalid"},
		{"unknown kid", sign(jwt.SigningMethodES256, "x", ecKey, good), api.Principal{}, `no key "x"`},
		{"HS256 with the public key", sign(jwt.SigningMethodHS256, "r", rsaPEM, good), api.Principal{}, "signing method HS256 is invalid"},
		{"none", sign(jwt.SigningMethodNone, "r", jwt.UnsafeAllowNoneSignatureType, good), api.Principal{}, "signing method none is invalid"},
		{"bad role", sign(jwt.SigningMethodES256, "e", ecKey, with("role", "root")), api.Principal{}, `claim role: "root"`},
		{"tenant without org", sign(jwt.SigningMethodES256, "e", ecKey, with("org", nil)), api.Principal{}, "no claim org"},
		{"bad tenant", sign(jwt.SigningMethodES256, "e", ecKey, with("org", "__unallocated__")), api.Principal{}, "not a valid tenant name"},
		{"no sub", sign(jwt.SigningMethodES256, "e", ecKey, with("sub", nil)), api.Principal{}, "no claim sub"},
		{"empty sub", sign(jwt.SigningMethodES256, "e", ecKey, with("sub", "")), api.Principal{}, "no claim sub"},
		{"sub not a string", sign(jwt.SigningMethodES256, "e", ecKey, with("sub", 42)), api.Principal{}, "no claim sub"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := a.Principal(request("Bearer " + tt.token))
			switch {
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("error %v, want one naming %q", err, tt.err)
			case tt.err == "" && err != nil:
				t.Fatal(err)
			case p.Name != tt.want.Name || p.Role != tt.want.Role || !slices.Equal(p.Tenants, tt.want.Tenants):
				t.Fatalf("principal %+v, want %+v", p, tt.want)
			}
		})
	}
}

// TestNewTokenCheckedOnce: many requests arriving at once with a token not proven yet check
// it with bcrypt once per slot at most, not once each: the others find it proven once admitted.
func TestNewTokenCheckedOnce(t *testing.T) {
	a, err := Parse("auth.yaml", []byte(fmt.Sprintf("tokens:\n  - {name: a, hash: %q, role: finance}\n  - {name: b, hash: %q, role: finance}\n",
		hash(t, "other-token-0123456789"), hash(t, "dash-token-0123456789"))))
	if err != nil {
		t.Fatal(err)
	}
	const clients = 20
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p, err := a.Principal(request("Bearer dash-token-0123456789")); err != nil || p.Name != "b" {
				t.Errorf("principal %+v, %v; want b", p, err)
			}
		}()
	}
	wg.Wait()
	// Each admitted check compares with both entries (they have no lookup key); at most
	// cap(fallback) run before the token is known.
	if got, most := a.checks.Load(), int64(2*cap(a.fallback)); got > most {
		t.Errorf("%d bcrypt checks for %d requests with one new token; want at most %d", got, clients, most)
	}
}
