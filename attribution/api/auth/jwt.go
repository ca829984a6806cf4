package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/slicemeter/slicemeter/attribution/api"
	"github.com/slicemeter/slicemeter/schemas/validate"
)

// JWTConfig is the auth file's jwt section.
type JWTConfig struct {
	JWKSFile string
	// JWKSURL, instead of a file: the identity provider's key set, fetched at start, again every
	// Refresh (default 15 minutes), and when a token names a key not known yet (at most once a
	// minute), so that the provider can rotate its keys.
	JWKSURL          string
	Refresh          time.Duration
	Issuer, Audience string
	RoleClaim        string // the claim holding the role
	TenantsClaim     string // the claim holding the tenant (a string) or tenants (a list)
	Logger           *slog.Logger
}

// JWTVerifier verifies JWTs against the keys of a JWKS file or URL: signature, issuer, audience
// and expiry (required), then maps the claims to a principal.
type JWTVerifier struct {
	cfg    JWTConfig
	client *http.Client
	// minFetch is the least time between two fetches a token with an unknown kid may cause: a
	// stream of made-up kids must not turn into a stream of requests to the provider.
	minFetch time.Duration

	mu        sync.RWMutex
	keys      map[string]any // by kid; "" when the set has one key without a kid
	fetched   time.Time      // the last fetch tried
	good      time.Time      // the last fetch that gave keys
	fetchMu   sync.Mutex     // one fetch at a time
	refreshes atomic.Bool    // a background refresh is running
}

// Default JWKS URL timings.
const (
	defaultRefresh = 15 * time.Minute
	minFetch       = time.Minute
	fetchTimeout   = 10 * time.Second
	maxJWKSBytes   = 1 << 20
)

// leeway absorbs clock skew between the identity provider and this server.
const leeway = 30 * time.Second

// The signing methods accepted: asymmetric only, so that a public key file can never be used
// as an HMAC secret.
func methods() []string {
	return []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
}

// NewJWTVerifier reads the JWKS file of cfg, or fetches its JWKS URL. A URL that cannot be
// fetched at start is not an error: the provider may be down for a while, and the rest of the
// service (attribution, the bill) must run meanwhile; JWTs are refused until its keys arrive,
// and each refusal says why.
func NewJWTVerifier(cfg JWTConfig) (*JWTVerifier, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = defaultRefresh
	}
	v := &JWTVerifier{cfg: cfg, client: &http.Client{Timeout: fetchTimeout}, minFetch: minFetch}
	if cfg.JWKSURL != "" {
		if err := v.fetch(); err != nil {
			cfg.Logger.Warn("the JWKS URL cannot be read; JWTs are refused until it can", "url", cfg.JWKSURL, "err", err)
		}
		return v, nil
	}
	data, err := os.ReadFile(cfg.JWKSFile)
	if err != nil {
		return nil, err
	}
	keys, err := parseJWKS(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.JWKSFile, err)
	}
	v.keys = keys
	return v, nil
}

// fetch reads the JWKS URL; on any failure the keys known so far stay.
func (v *JWTVerifier) fetch() error {
	v.fetchMu.Lock()
	defer v.fetchMu.Unlock()
	v.mu.Lock()
	v.fetched = time.Now()
	v.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.cfg.JWKSURL, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", v.cfg.JWKSURL, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return fmt.Errorf("reading %s: %w", v.cfg.JWKSURL, err)
	}
	if len(data) > maxJWKSBytes {
		return fmt.Errorf("%s: a key set over %d bytes", v.cfg.JWKSURL, maxJWKSBytes)
	}
	keys, err := parseJWKS(data)
	if err != nil {
		return fmt.Errorf("%s: %w", v.cfg.JWKSURL, err)
	}
	v.mu.Lock()
	v.keys, v.good = keys, time.Now()
	v.mu.Unlock()
	return nil
}

// lookup finds the key of kid; from a URL it refreshes a stale set in the background and
// fetches again for a kid not known yet, at most once every minFetch.
func (v *JWTVerifier) lookup(kid string) (any, bool) {
	v.mu.RLock()
	k, ok := v.keys[kid]
	fetched, good := v.fetched, v.good
	v.mu.RUnlock()
	if v.cfg.JWKSURL == "" {
		return k, ok
	}
	if ok {
		if time.Since(good) > v.cfg.Refresh && time.Since(fetched) > v.minFetch && v.refreshes.CompareAndSwap(false, true) {
			go func() {
				defer v.refreshes.Store(false)
				if err := v.fetch(); err != nil {
					v.cfg.Logger.Warn("the JWKS URL cannot be read; the keys read before are used", "url", v.cfg.JWKSURL, "err", err)
				}
			}()
		}
		return k, true
	}
	if time.Since(fetched) < v.minFetch {
		return nil, false
	}
	if err := v.fetch(); err != nil {
		v.cfg.Logger.Warn("the JWKS URL cannot be read", "url", v.cfg.JWKSURL, "err", err)
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	k, ok = v.keys[kid]
	return k, ok
}

// Verify checks the token and maps its claims to a principal. Errors say what was wrong,
// never the token.
func (v *JWTVerifier) Verify(token string) (api.Principal, error) {
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(token, claims, v.key, jwt.WithValidMethods(methods()), jwt.WithIssuer(v.cfg.Issuer),
		jwt.WithAudience(v.cfg.Audience), jwt.WithExpirationRequired(), jwt.WithLeeway(leeway))
	if err != nil {
		return api.Principal{}, fmt.Errorf("the bearer JWT is not valid: %w", err)
	}
	// The subject names the caller in the audit trail and the logs: without it every such
	// caller would be the same "jwt:", so the token is refused rather than audited blind.
	sub, _ := claims["sub"].(string)
	if sub == "" {
		return api.Principal{}, errors.New("the bearer JWT has no claim sub (a string naming the caller, for the audit trail)")
	}
	p := api.Principal{Name: "jwt:" + sub}
	role, _ := claims[v.cfg.RoleClaim].(string)
	if p.Role = api.Role(role); !slices.Contains(api.Roles(), p.Role) {
		return api.Principal{}, fmt.Errorf("the bearer JWT's claim %s: %q; expected one of %s", v.cfg.RoleClaim, role, rolesText())
	}
	switch t := claims[v.cfg.TenantsClaim].(type) {
	case nil:
	case string:
		p.Tenants = []string{t}
	case []any:
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return api.Principal{}, fmt.Errorf("the bearer JWT's claim %s: expected a tenant name or a list of them", v.cfg.TenantsClaim)
			}
			p.Tenants = append(p.Tenants, s)
		}
	default:
		return api.Principal{}, fmt.Errorf("the bearer JWT's claim %s: expected a tenant name or a list of them", v.cfg.TenantsClaim)
	}
	for _, t := range p.Tenants {
		if validate.Tenant(t) != nil {
			return api.Principal{}, fmt.Errorf("the bearer JWT's claim %s: %q is not a valid tenant name", v.cfg.TenantsClaim, t)
		}
	}
	switch {
	case p.Role == api.RoleTenant && len(p.Tenants) == 0:
		return api.Principal{}, fmt.Errorf("the bearer JWT has role tenant but no claim %s", v.cfg.TenantsClaim)
	case p.Role == api.RoleOperator || p.Role == api.RoleFinance:
		p.Tenants = nil // they cover every tenant
	}
	return p, nil
}

func (v *JWTVerifier) key(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	if k, ok := v.lookup(kid); ok {
		return k, nil
	}
	if v.cfg.JWKSURL != "" {
		return nil, fmt.Errorf("no key %q in the JWKS read from %s", kid, v.cfg.JWKSURL)
	}
	return nil, fmt.Errorf("no key %q in the JWKS file", kid)
}

// jwk is one JSON Web Key (RFC 7517), public parts only.
type jwk struct {
	Kty, Kid, Use, Crv string
	N, E, X, Y         string
}

func parseJWKS(data []byte) (map[string]any, error) {
	var set struct{ Keys []jwk }
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("not a JWKS (%v)", err)
	}
	if len(set.Keys) == 0 {
		return nil, errors.New("no keys")
	}
	keys := map[string]any{}
	for i, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		pub, err := k.public()
		if err != nil {
			return nil, fmt.Errorf("key %d (kid %q): %w", i, k.Kid, err)
		}
		if _, dup := keys[k.Kid]; dup {
			return nil, fmt.Errorf("key %d: kid %q twice", i, k.Kid)
		}
		keys[k.Kid] = pub
	}
	return keys, nil
}

func (k jwk) public() (any, error) {
	b64 := func(s string) (*big.Int, []byte, error) {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(b) == 0 {
			return nil, nil, fmt.Errorf("bad base64url value %q", s)
		}
		return new(big.Int).SetBytes(b), b, nil
	}
	switch k.Kty {
	case "RSA":
		n, _, err := b64(k.N)
		if err != nil {
			return nil, err
		}
		e, _, err := b64(k.E)
		if err != nil || !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31 {
			return nil, fmt.Errorf("bad RSA exponent %q", k.E)
		}
		if n.BitLen() < 2048 {
			return nil, fmt.Errorf("RSA key of %d bits; expected at least 2048", n.BitLen())
		}
		return &rsa.PublicKey{N: n, E: int(e.Int64())}, nil
	case "EC":
		curves := map[string]elliptic.Curve{"P-256": elliptic.P256(), "P-384": elliptic.P384(), "P-521": elliptic.P521()}
		c, ok := curves[k.Crv]
		if !ok {
			return nil, fmt.Errorf("curve %q; expected P-256, P-384 or P-521", k.Crv)
		}
		size := (c.Params().BitSize + 7) / 8
		_, x, err := b64(k.X)
		if err != nil || len(x) != size {
			return nil, fmt.Errorf("bad %s x coordinate %q", k.Crv, k.X)
		}
		_, y, err := b64(k.Y)
		if err != nil || len(y) != size {
			return nil, fmt.Errorf("bad %s y coordinate %q", k.Crv, k.Y)
		}
		pub, err := ecdsa.ParseUncompressedPublicKey(c, slices.Concat([]byte{4}, x, y))
		if err != nil {
			return nil, fmt.Errorf("the %s point: %w", k.Crv, err)
		}
		return pub, nil
	case "OKP":
		if k.Crv != "Ed25519" {
			return nil, fmt.Errorf("curve %q; expected Ed25519", k.Crv)
		}
		_, x, err := b64(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("bad Ed25519 key %q", k.X)
		}
		return ed25519.PublicKey(x), nil
	}
	return nil, fmt.Errorf("key type %q; expected RSA, EC or OKP", k.Kty)
}
