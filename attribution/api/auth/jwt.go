package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/slicemeter/slicemeter/attribution/api"
	"github.com/slicemeter/slicemeter/schemas/validate"
)

// JWTConfig is the auth file's jwt section.
type JWTConfig struct {
	JWKSFile         string
	Issuer, Audience string
	RoleClaim        string // the claim holding the role
	TenantsClaim     string // the claim holding the tenant (a string) or tenants (a list)
}

// JWTVerifier verifies JWTs against the keys of a JWKS file: signature, issuer, audience and
// expiry (required), then maps the claims to a principal.
type JWTVerifier struct {
	cfg  JWTConfig
	keys map[string]any // by kid; "" when the set has one key without a kid
}

// leeway absorbs clock skew between the identity provider and this server.
const leeway = 30 * time.Second

// The signing methods accepted: asymmetric only, so that a public key file can never be used
// as an HMAC secret.
func methods() []string {
	return []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
}

// NewJWTVerifier reads the JWKS file of cfg.
func NewJWTVerifier(cfg JWTConfig) (*JWTVerifier, error) {
	data, err := os.ReadFile(cfg.JWKSFile)
	if err != nil {
		return nil, err
	}
	keys, err := parseJWKS(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.JWKSFile, err)
	}
	return &JWTVerifier{cfg: cfg, keys: keys}, nil
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
	sub, _ := claims["sub"].(string)
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
	if k, ok := v.keys[kid]; ok {
		return k, nil
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
