// Package auth authenticates the attribution API's callers from an auth file
// (--api.auth-file): static bearer tokens stored as bcrypt hashes, each with a role and
// tenants, and JWTs verified against a JWKS file, their claims mapped to a role and tenants.
// An Authenticator is the api.Authorizer the service runs with.
package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/crypto/bcrypt"

	"github.com/slicemeter/slicemeter/attribution/api"
)

// Token is a static bearer token: the bcrypt hash of its secret and who it is.
type Token struct {
	Name string
	Hash []byte // bcrypt
	api.Principal
}

// Authenticator maps a request's bearer token to a principal.
type Authenticator struct {
	tokens []Token
	jwt    *JWTVerifier // nil: no JWTs accepted

	// Verified tokens by their SHA-256: bcrypt is deliberately slow (tens of ms a check), too
	// slow for every request of a dashboard; a token proven once is known by its digest.
	mu    sync.Mutex
	known map[[sha256.Size]byte]api.Principal
	// checking bounds the bcrypt checks running at once: a flood of wrong tokens (each costs
	// a check per entry) then holds some of the cores, never all of them.
	checking chan struct{}
	checks   atomic.Int64 // bcrypt checks made, for tests
}

// maxKnown bounds the verified-token cache; past it the cache starts over (tokens are few).
const maxKnown = 1024

// New is an authenticator of the tokens and, when jwt is not nil, of JWTs.
func New(tokens []Token, jwt *JWTVerifier) *Authenticator {
	return &Authenticator{tokens: tokens, jwt: jwt, known: map[[sha256.Size]byte]api.Principal{},
		checking: make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))}
}

// Errors a request can be refused with (401). None names the token.
var (
	ErrNoToken  = errors.New("no bearer token: send the header Authorization: Bearer TOKEN")
	ErrBadToken = errors.New("the bearer token is not valid")
)

// Principal implements api.Authorizer.
func (a *Authenticator) Principal(r *http.Request) (api.Principal, error) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if h == "" {
		return api.Principal{}, ErrNoToken
	}
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") {
		return api.Principal{}, fmt.Errorf("authorization header: the scheme %q; expected Bearer TOKEN", scheme)
	}
	if !ok || token == "" {
		return api.Principal{}, errors.New("authorization header: Bearer without a token; expected Bearer TOKEN")
	}
	if a.jwt != nil && strings.Count(token, ".") == 2 {
		return a.jwt.Verify(token)
	}
	return a.static(r.Context(), token)
}

func (a *Authenticator) static(ctx context.Context, token string) (api.Principal, error) {
	sum := sha256.Sum256([]byte(token))
	a.mu.Lock()
	p, ok := a.known[sum]
	a.mu.Unlock()
	if ok {
		return p, nil
	}
	select {
	case a.checking <- struct{}{}:
		defer func() { <-a.checking }()
	case <-ctx.Done():
		return api.Principal{}, fmt.Errorf("checking the bearer token: %w", ctx.Err())
	}
	// Again once admitted: 50 clients starting with one new token all queue here, and all
	// but the first find it proven (BenchmarkAPILoad saw a p99 of 5 s without this).
	a.mu.Lock()
	p, ok = a.known[sum]
	a.mu.Unlock()
	if ok {
		return p, nil
	}
	for _, t := range a.tokens {
		a.checks.Add(1)
		if bcrypt.CompareHashAndPassword(t.Hash, []byte(token)) == nil {
			p := t.Principal
			p.Name = t.Name
			a.mu.Lock()
			if len(a.known) >= maxKnown {
				clear(a.known)
			}
			a.known[sum] = p
			a.mu.Unlock()
			return p, nil
		}
	}
	return api.Principal{}, ErrBadToken
}
