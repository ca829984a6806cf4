package auth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/bcrypt"

	"github.com/slicemeter/slicemeter/attribution/api"
	"github.com/slicemeter/slicemeter/internal/usage"
	"github.com/slicemeter/slicemeter/schemas/validate"
)

// Load reads and validates an auth file (docs/api.md, "API authentication"). Every problem is a
// usage error naming the file, the line and the field.
// The logger gets what a JWKS URL's fetches run into.
func Load(path string, logger *slog.Logger) (*Authenticator, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, usage.Errorf("--api.auth-file: %w", err)
	}
	return parse(path, data, logger)
}

// Parse validates auth file YAML; file names it in errors and is where a relative jwks_file
// is found from. It reports every problem it finds, not only the first.
func Parse(file string, data []byte) (*Authenticator, error) { return parse(file, data, nil) }

func parse(file string, data []byte, logger *slog.Logger) (*Authenticator, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, usage.Wrap(&fieldError{file: file, got: "the file is empty", expected: expectedFile})
		}
		return nil, usage.Wrap(&fieldError{file: file, got: "not YAML (" + strings.TrimPrefix(err.Error(), "yaml: ") + ")", expected: expectedFile})
	}
	p := parser{file: file, logger: logger}
	a := p.authFile(doc.Content[0])
	if len(p.errs) > 0 {
		return nil, usage.Wrap(errors.Join(p.errs...))
	}
	return a, nil
}

const expectedFile = "a mapping with tokens (a list) and/or jwt (a mapping)"

// fieldError is one problem of an auth file.
type fieldError struct {
	file          string
	line          int
	field         string
	got, expected string
}

func (e *fieldError) Error() string {
	where := e.file
	if e.line > 0 {
		where = fmt.Sprintf("%s:%d", e.file, e.line)
	}
	if e.field != "" {
		where += ": " + e.field
	}
	return fmt.Sprintf("%s: %s; expected %s", where, e.got, e.expected)
}

type parser struct {
	file   string
	logger *slog.Logger
	errs   []error
}

func (p *parser) fail(n *yaml.Node, field, got, expected string) {
	p.errs = append(p.errs, &fieldError{file: p.file, line: n.Line, field: field, got: got, expected: expected})
}

// mapping yields a mapping node's keys and values, failing for anything else or a key
// repeated.
func (p *parser) mapping(n *yaml.Node, field, expected string) [][2]*yaml.Node {
	if n.Kind != yaml.MappingNode {
		p.fail(n, field, describe(n), expected)
		return nil
	}
	var out [][2]*yaml.Node
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if seen[k.Value] {
			p.fail(k, join(field, k.Value), "a second "+k.Value, "each field once")
			continue
		}
		seen[k.Value] = true
		out = append(out, [2]*yaml.Node{k, n.Content[i+1]})
	}
	return out
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an alias"
}

func (p *parser) str(n *yaml.Node, field, expected string) string {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" || n.Value == "" {
		p.fail(n, field, describe(n), expected)
		return ""
	}
	return n.Value
}

func (p *parser) authFile(root *yaml.Node) *Authenticator {
	var tokens []Token
	var jwt *JWTVerifier
	seen := false
	for _, kv := range p.mapping(root, "", expectedFile) {
		switch k, v := kv[0], kv[1]; k.Value {
		case "tokens":
			seen = true
			tokens = p.tokens(v)
		case "jwt":
			seen = true
			jwt = p.jwt(v)
		default:
			p.fail(k, k.Value, "an unknown field", "tokens or jwt")
		}
	}
	if !seen && root.Kind == yaml.MappingNode {
		p.fail(root, "", "neither tokens nor jwt", expectedFile+": an auth file that admits nobody is a mistake")
	}
	return New(tokens, jwt)
}

const expectedToken = "a mapping with name, hash and lookup (from `slicemeter api token hash`), role and, for roles tenant and scheduler, tenants"

const expectedLookup = "the 8 hex digits of the token's lookup key, from `slicemeter api token hash`"

func (p *parser) tokens(n *yaml.Node) []Token {
	if n.Kind != yaml.SequenceNode {
		p.fail(n, "tokens", describe(n), "a list of tokens, each "+expectedToken)
		return nil
	}
	var out []Token
	names := map[string]bool{}
	for i, e := range n.Content {
		field := fmt.Sprintf("tokens[%d]", i)
		var t Token
		var roleNode *yaml.Node
		for _, kv := range p.mapping(e, field, expectedToken) {
			k, v := kv[0], kv[1]
			f := join(field, k.Value)
			switch k.Value {
			case "name":
				if t.Name = p.str(v, f, "a name for logs, unique in the file"); t.Name != "" && names[t.Name] {
					p.fail(v, f, fmt.Sprintf("%q again", t.Name), "a name unique in the file")
				}
				names[t.Name] = true
			case "hash":
				h := p.str(v, f, "a bcrypt hash ($2a$, $2b$ or $2y$) from `slicemeter api token hash`")
				if h == "" {
					continue
				}
				if _, err := bcrypt.Cost([]byte(h)); err != nil {
					p.fail(v, f, "not a bcrypt hash ("+err.Error()+")", "a bcrypt hash ($2a$, $2b$ or $2y$) from `slicemeter api token hash`, never the token itself")
					continue
				}
				t.Hash = []byte(h)
			case "lookup":
				t.Lookup, t.Keyed = p.lookup(v, f)
			case "role":
				roleNode = v
				t.Role = p.role(v, f)
			case "tenants":
				t.Tenants = p.tenantList(v, f)
			default:
				p.fail(k, f, "an unknown field", "name, hash, lookup, role or tenants")
			}
		}
		if e.Kind != yaml.MappingNode {
			continue
		}
		for _, req := range []struct {
			name    string
			missing bool
		}{{"name", t.Name == ""}, {"hash", t.Hash == nil}, {"role", roleNode == nil}} {
			if req.missing && !p.has(e, req.name) {
				p.fail(e, join(field, req.name), "missing", expectedToken)
			}
		}
		p.checkTenants(e, field, t.Principal)
		out = append(out, t)
	}
	return out
}

// lookup reads an entry's lookup key (LookupKey, as 8 hex digits).
func (p *parser) lookup(n *yaml.Node, field string) (uint32, bool) {
	s := p.str(n, field, expectedLookup)
	if s == "" {
		return 0, false
	}
	k, err := strconv.ParseUint(s, 16, 32)
	if err != nil || len(s) != 8 {
		p.fail(n, field, fmt.Sprintf("%q", s), expectedLookup)
		return 0, false
	}
	return uint32(k), true
}

// has says whether the mapping has the key (a present but bad value was reported already).
func (p *parser) has(m *yaml.Node, key string) bool {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return true
		}
	}
	return false
}

// checkTenants: a tenant names its tenants; operator and finance read everything, so tenants
// on them would be a misunderstanding.
func (p *parser) checkTenants(n *yaml.Node, field string, pr api.Principal) {
	switch {
	case pr.Role == api.RoleTenant && len(pr.Tenants) == 0 && !p.has(n, "tenants"):
		p.fail(n, join(field, "tenants"), "missing", "the tenants a principal of role tenant reads (at least one)")
	case (pr.Role == api.RoleOperator || pr.Role == api.RoleFinance) && len(pr.Tenants) > 0:
		p.fail(n, join(field, "tenants"), strings.Join(pr.Tenants, ","), "no tenants for role "+string(pr.Role)+" (it covers every tenant)")
	}
}

func rolesText() string {
	s := make([]string, len(api.Roles()))
	for i, r := range api.Roles() {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

func (p *parser) role(n *yaml.Node, field string) api.Role {
	r := api.Role(p.str(n, field, "one of "+rolesText()))
	if r != "" && !slices.Contains(api.Roles(), r) {
		p.fail(n, field, fmt.Sprintf("%q", r), "one of "+rolesText())
		return ""
	}
	return r
}

func (p *parser) tenantList(n *yaml.Node, field string) []string {
	const expected = "a list of tenant names"
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		p.fail(n, field, describe(n), expected+" (at least one)")
		return nil
	}
	var out []string
	for i, e := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		name := p.str(e, f, "a tenant name")
		if name == "" {
			continue
		}
		if r := validate.Tenant(name); r != nil {
			p.fail(e, f, fmt.Sprintf("%q", name), "a valid tenant name ("+r.Error()+")")
			continue
		}
		out = append(out, name)
	}
	return out
}

const expectedJWT = "a mapping with jwks_file or jwks_url, issuer, audience and optionally jwks_refresh (with jwks_url), role_claim (default role) and tenants_claim (default tenants)"

func (p *parser) jwt(n *yaml.Node) *JWTVerifier {
	cfg := JWTConfig{RoleClaim: "role", TenantsClaim: "tenants", Logger: p.logger}
	var jwksNode, urlNode, refreshNode *yaml.Node
	for _, kv := range p.mapping(n, "jwt", expectedJWT) {
		k, v := kv[0], kv[1]
		f := join("jwt", k.Value)
		switch k.Value {
		case "jwks_file":
			jwksNode = v
			cfg.JWKSFile = p.str(v, f, "the path of a JWKS file (relative: to the auth file)")
		case "jwks_url":
			urlNode = v
			cfg.JWKSURL = p.jwksURL(v, f)
		case "jwks_refresh":
			refreshNode = v
			cfg.Refresh = p.refresh(v, f)
		case "issuer":
			cfg.Issuer = p.str(v, f, "the issuer (iss) the tokens must carry")
		case "audience":
			cfg.Audience = p.str(v, f, "the audience (aud) the tokens must carry")
		case "role_claim":
			cfg.RoleClaim = p.str(v, f, "the claim that holds the role")
		case "tenants_claim":
			cfg.TenantsClaim = p.str(v, f, "the claim that holds the tenant or tenants")
		default:
			p.fail(k, f, "an unknown field", "jwks_file, jwks_url, jwks_refresh, issuer, audience, role_claim or tenants_claim")
		}
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	switch has := [2]bool{p.has(n, "jwks_file"), p.has(n, "jwks_url")}; has {
	case [2]bool{false, false}:
		p.fail(n, "jwt.jwks_file", "missing", expectedJWT)
	case [2]bool{true, true}:
		p.fail(urlNode, "jwt.jwks_url", "both jwks_file and jwks_url", "one of them: the keys come from one place")
	}
	if refreshNode != nil && !p.has(n, "jwks_url") {
		p.fail(refreshNode, "jwt.jwks_refresh", "without jwks_url", "jwks_refresh only with jwks_url (a file is read once)")
	}
	for _, req := range []string{"issuer", "audience"} {
		if !p.has(n, req) {
			p.fail(n, join("jwt", req), "missing", expectedJWT)
		}
	}
	if (cfg.JWKSFile == "") == (cfg.JWKSURL == "") || cfg.Issuer == "" || cfg.Audience == "" || (cfg.JWKSURL != "" && len(p.errs) > 0) {
		return nil
	}
	if cfg.JWKSFile != "" && !filepath.IsAbs(cfg.JWKSFile) {
		cfg.JWKSFile = filepath.Join(filepath.Dir(p.file), cfg.JWKSFile)
	}
	v, err := NewJWTVerifier(cfg)
	if err != nil {
		p.fail(jwksNode, "jwt.jwks_file", err.Error(), "a JWKS file of RSA, EC (P-256, P-384, P-521) or Ed25519 public keys")
		return nil
	}
	return v
}

// jwksURL accepts https, or http to a loopback address (a sidecar, a test): keys fetched in
// the clear over a network could be replaced by anyone on the path.
func (p *parser) jwksURL(n *yaml.Node, field string) string {
	const expected = "an https URL of the identity provider's JWKS (http only to a loopback address)"
	s := p.str(n, field, expected)
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Host == "" || u.User != nil:
		p.fail(n, field, fmt.Sprintf("%q", s), expected+", without user information")
		return ""
	case u.Scheme == "https":
	case u.Scheme == "http" && loopback(u.Hostname()):
	default:
		p.fail(n, field, fmt.Sprintf("%q", s), expected)
		return ""
	}
	return s
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (p *parser) refresh(n *yaml.Node, field string) time.Duration {
	const expected = "a duration of at least 1m (how often the JWKS URL is read again), e.g. 15m"
	s := p.str(n, field, expected)
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Minute {
		p.fail(n, field, fmt.Sprintf("%q", s), expected)
		return 0
	}
	return d
}
