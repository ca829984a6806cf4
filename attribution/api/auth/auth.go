// Package auth authenticates the attribution API's callers from an auth file
// (--api.auth-file): static bearer tokens stored as bcrypt hashes, each with a role and
// tenants, and JWTs verified against a JWKS file, their claims mapped to a role and tenants.
// An Authenticator is the api.Authorizer the service runs with.
package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/slicemeter/slicemeter/attribution/api"
	"github.com/slicemeter/slicemeter/internal/faillimit"
)

// Token is a static bearer token: the bcrypt hash of its secret and who it is.
type Token struct {
	Name string
	Hash []byte // bcrypt
	// Lookup is the token's lookup key (LookupKey), or zero for an entry made before lookup
	// keys existed: such entries are found only by trying bcrypt on each (the fallback).
	Lookup uint32
	Keyed  bool // Lookup is set
	api.Principal
}

// Authenticator maps a request's bearer token to a principal.
//
// What a request costs: one keyed SHA-256 of its token. A token proven before is found by it
// in the cache; a token with a lookup key selects its one entry, compared with bcrypt once
// and then cached. A token matching no entry's lookup key is refused without bcrypt, unless
// the file has entries without lookup keys: those are tried with bcrypt, but only by an
// address under its limit of failures (package faillimit) and one scan per slot of fallback.
type Authenticator struct {
	tokens []Token
	keyed  map[uint32][]int // entries by lookup key
	legacy []int            // entries without a lookup key
	jwt    *JWTVerifier     // nil: no JWTs accepted

	// Verified tokens by their keyed digest: bcrypt is deliberately slow (tens of ms a check),
	// too slow for every request of a dashboard; a token proven once is known by its digest
	// for cacheTTL.
	mu    sync.Mutex
	known map[[sha256.Size]byte]verified
	// checking bounds the bcrypt checks of keyed entries running at once (only a valid token,
	// or one in 2^32 made up, gets there); fallback the scans of the entries without a lookup
	// key. A flood of wrong tokens holds neither or, with old entries, fallback's slots only.
	checking chan struct{}
	fallback chan struct{}
	// pending: tokens whose scan of the entries without a lookup key is running. A dashboard
	// opening with one new token sends it many times at once; only the first scans (and counts
	// against its address's limit of failures), the rest wait for its answer.
	pending  map[[sha256.Size]byte]chan struct{}
	failures *faillimit.Limiter
	metrics  *metrics
	now      func() time.Time
	// compare is bcrypt's comparison; a seam for the tests, which count what a flood costs.
	compare func(hash, token []byte) error
	checks  atomic.Int64 // bcrypt comparisons made
}

type verified struct {
	p     api.Principal
	until time.Time
}

// The verified-token cache: bounded (tokens are few; past maxKnown the expired entries go,
// then an arbitrary one), and an entry is proven again after cacheTTL so that a process
// running for months does not keep a token's first check forever.
const (
	maxKnown = 1024
	cacheTTL = 15 * time.Minute
)

// New is an authenticator of the tokens and, when jwt is not nil, of JWTs. Every call starts
// with an empty cache: an auth file loaded again proves its tokens again.
func New(tokens []Token, jwt *JWTVerifier) *Authenticator {
	slots := max(1, runtime.GOMAXPROCS(0)/2)
	a := &Authenticator{tokens: tokens, jwt: jwt, keyed: map[uint32][]int{}, known: map[[sha256.Size]byte]verified{},
		pending:  map[[sha256.Size]byte]chan struct{}{},
		checking: make(chan struct{}, slots), fallback: make(chan struct{}, slots),
		failures: faillimit.New(), metrics: newMetrics(), now: time.Now, compare: bcrypt.CompareHashAndPassword}
	for i, t := range tokens {
		if t.Keyed {
			a.keyed[t.Lookup] = append(a.keyed[t.Lookup], i)
		} else {
			a.legacy = append(a.legacy, i)
		}
	}
	return a
}

// Errors a request can be refused with (401). None names the token.
var (
	ErrNoToken  = errors.New("no bearer token: send the header Authorization: Bearer TOKEN")
	ErrBadToken = errors.New("the bearer token is not valid")
)

// lookupKey keys the digest of a token, so that the digests this package keeps or files hold
// are of no use as a plain SHA-256 of the token elsewhere.
var lookupKey = []byte("slicemeter api token lookup v1")

// digest is the keyed SHA-256 of a token: the cache's key, and its first four bytes the
// token's lookup key.
func digest(token string) [sha256.Size]byte {
	m := hmac.New(sha256.New, lookupKey)
	m.Write([]byte(token))
	var d [sha256.Size]byte
	m.Sum(d[:0])
	return d
}

// LookupKey is what an auth file entry's lookup field holds for token: 32 bits of its keyed
// digest, enough to pick the entry among a file's and to refuse a made-up token without
// bcrypt (a random one matches an entry's key once in 2^32 / entries), too few to find the
// token from a leaked file (the bcrypt hash still decides).
func LookupKey(token string) uint32 {
	d := digest(token)
	return binary.BigEndian.Uint32(d[:4])
}

// Principal implements api.Authorizer.
func (a *Authenticator) Principal(r *http.Request) (api.Principal, error) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if h == "" {
		a.metrics.refused(reasonNoToken)
		return api.Principal{}, ErrNoToken
	}
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") {
		a.metrics.refused(reasonMalformed)
		return api.Principal{}, fmt.Errorf("authorization header: the scheme %q; expected Bearer TOKEN", scheme)
	}
	if !ok || token == "" {
		a.metrics.refused(reasonMalformed)
		return api.Principal{}, errors.New("authorization header: Bearer without a token; expected Bearer TOKEN")
	}
	if a.jwt != nil && strings.Count(token, ".") == 2 {
		p, err := a.jwt.Verify(token)
		if err != nil {
			a.metrics.refused(reasonBadJWT)
		}
		return p, err
	}
	return a.static(r.Context(), faillimit.Address(r), token)
}

func (a *Authenticator) cached(sum [sha256.Size]byte) (api.Principal, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.known[sum]
	if ok && a.now().After(v.until) {
		delete(a.known, sum)
		return api.Principal{}, false
	}
	return v.p, ok
}

func (a *Authenticator) remember(sum [sha256.Size]byte, p api.Principal) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	if len(a.known) >= maxKnown {
		for k, v := range a.known {
			if now.After(v.until) {
				delete(a.known, k)
			}
		}
	}
	if len(a.known) >= maxKnown {
		for k := range a.known {
			delete(a.known, k)
			break
		}
	}
	a.known[sum] = verified{p: p, until: now.Add(cacheTTL)}
}

// acquire takes a slot of sem, or gives up when the request ends.
func acquire(ctx context.Context, sem chan struct{}) error {
	select {
	case sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("checking the bearer token: %w", ctx.Err())
	}
}

// check compares token with the entries idx, caching the principal of the one it matches.
func (a *Authenticator) check(sum [sha256.Size]byte, token string, idx []int) (api.Principal, bool) {
	for _, i := range idx {
		t := a.tokens[i]
		a.checks.Add(1)
		a.metrics.bcrypt.Inc()
		if a.compare(t.Hash, []byte(token)) == nil {
			p := t.Principal
			p.Name = t.Name
			a.remember(sum, p)
			return p, true
		}
	}
	return api.Principal{}, false
}

// maxTokenLen is the longest static token: bcrypt reads 72 bytes, and HashEntry hashes no
// longer one. A longer one is refused before it is hashed at all.
const maxTokenLen = 72

func (a *Authenticator) static(ctx context.Context, addr, token string) (api.Principal, error) {
	if len(token) > maxTokenLen {
		return api.Principal{}, a.refuse(addr, reasonUnknown)
	}
	sum := digest(token)
	if p, ok := a.cached(sum); ok {
		return p, nil
	}
	reason := reasonUnknown
	if idx := a.keyed[binary.BigEndian.Uint32(sum[:4])]; len(idx) > 0 {
		reason = reasonWrong
		// Only a valid token, or one in 2^32 made up, gets here: no limit of failures applies,
		// so that a valid caller behind the address of a flood is served.
		if err := acquire(ctx, a.checking); err != nil {
			return api.Principal{}, err
		}
		p, ok := a.cached(sum) // proven by another request meanwhile
		if !ok {
			p, ok = a.check(sum, token, idx)
		}
		<-a.checking
		if ok {
			return p, nil
		}
	}
	if len(a.legacy) == 0 {
		return api.Principal{}, a.refuse(addr, reason)
	}
	// The same token being scanned by another request: its answer is this one's.
	a.mu.Lock()
	done, running := a.pending[sum]
	if !running {
		done = make(chan struct{})
		a.pending[sum] = done
	}
	a.mu.Unlock()
	if running {
		select {
		case <-done:
		case <-ctx.Done():
			return api.Principal{}, fmt.Errorf("checking the bearer token: %w", ctx.Err())
		}
		if p, ok := a.cached(sum); ok {
			return p, nil
		}
		return api.Principal{}, a.refuse(addr, reasonWrong)
	}
	defer func() {
		a.mu.Lock()
		delete(a.pending, sum)
		a.mu.Unlock()
		close(done)
	}()
	// Entries without a lookup key: one bcrypt each, so only for an address under its limit,
	// the failure counted before the check (and refunded if it succeeds).
	if wait := a.failures.Fail(addr); wait > 0 {
		a.metrics.limited.Inc()
		return api.Principal{}, &RateLimitedError{Wait: wait}
	}
	if err := acquire(ctx, a.fallback); err != nil {
		a.failures.Refund(addr)
		return api.Principal{}, err
	}
	defer func() { <-a.fallback }()
	// Again once admitted: 50 clients starting with one new token all queue here, and all
	// but the first find it proven (BenchmarkAPILoad saw a p99 of 5 s without this).
	p, ok := a.cached(sum)
	if !ok {
		p, ok = a.check(sum, token, a.legacy)
	}
	if ok {
		a.failures.Refund(addr)
		return p, nil
	}
	a.metrics.refused(reasonWrong)
	return api.Principal{}, ErrBadToken
}

// refuse counts a wrong token against addr: ErrBadToken, or once the address is past its
// limit a RateLimitedError.
func (a *Authenticator) refuse(addr, reason string) error {
	if wait := a.failures.Fail(addr); wait > 0 {
		a.metrics.limited.Inc()
		return &RateLimitedError{Wait: wait}
	}
	a.metrics.refused(reason)
	return ErrBadToken
}

// RateLimitedError refuses a request from an address that sent too many wrong tokens (429
// with Retry-After).
type RateLimitedError struct{ Wait time.Duration }

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("too many wrong bearer tokens from this address; try again in %s", e.RetryAfter())
}

// RetryAfter is how long the address should wait, in whole seconds (at least one).
func (e *RateLimitedError) RetryAfter() time.Duration {
	return faillimit.RetryAfter(e.Wait)
}
