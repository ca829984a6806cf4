package auth

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slicemeter/slicemeter/attribution/api"
	"github.com/slicemeter/slicemeter/internal/faillimit"
)

// entries are auth file entries as `slicemeter api token hash` prints them, each token's
// role filled in (at bcrypt.MinCost, so that the tests run fast).
func entries(t *testing.T, tokens map[string]string, keyed bool) string {
	t.Helper()
	var out strings.Builder
	out.WriteString("tokens:\n")
	for name, token := range tokens {
		fmt.Fprintf(&out, "  - name: %s\n    hash: %q\n    role: finance\n", name, hash(t, token))
		if keyed {
			fmt.Fprintf(&out, "    lookup: \"%08x\"\n", LookupKey(token))
		}
	}
	return out.String()
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func from(addr, authorization string) *http.Request {
	r := request(authorization)
	r.RemoteAddr = addr
	return r
}

// tokensOf is a few valid tokens.
var tokensOf = map[string]string{"ops": "ops-token-0123456789", "books": "books-token-0123456789", "dash": "dash-token-0123456789"}

// TestFloodCostsNoBcrypt: with entries that carry lookup keys, a flood of made-up tokens from
// many addresses costs no bcrypt comparison at all (each is one keyed hash), and a valid
// token costs one comparison, then none (the cache).
func TestFloodCostsNoBcrypt(t *testing.T) {
	a, err := Parse("auth.yaml", []byte(entries(t, tokensOf, true)))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		_, err := a.Principal(from(fmt.Sprintf("10.0.%d.%d:4000", i/200, i%200), "Bearer "+randomToken()))
		if !errors.Is(err, ErrBadToken) {
			t.Fatalf("a made-up token: %v, want %v", err, ErrBadToken)
		}
	}
	if _, err := a.Principal(from("10.9.0.1:1", "Bearer "+strings.Repeat("x", 1<<20))); !errors.Is(err, ErrBadToken) {
		t.Errorf("a token of 1 MiB: %v, want %v", err, ErrBadToken)
	}
	if n := a.checks.Load(); n != 0 {
		t.Errorf("2000 made-up tokens cost %d bcrypt comparisons; want 0", n)
	}
	for range 3 {
		if p, err := a.Principal(from("10.0.0.1:4000", "Bearer books-token-0123456789")); err != nil || p.Name != "books" {
			t.Fatalf("principal %+v, %v; want books", p, err)
		}
	}
	if n := a.checks.Load(); n != 1 {
		t.Errorf("a valid token asked 3 times cost %d bcrypt comparisons; want 1", n)
	}
}

// TestFailureLimit: an address past its limit of wrong tokens gets 429 with Retry-After and
// costs no more bcrypt comparisons (entries without lookup keys: the fallback), while other
// addresses and valid tokens from the same address are served; the limit refills with time.
func TestFailureLimit(t *testing.T) {
	legacy := entries(t, map[string]string{"old": "old-token-0123456789abc"}, false)
	keyed := strings.TrimPrefix(entries(t, map[string]string{"new": "new-token-0123456789abc"}, true), "tokens:\n")
	a, err := Parse("auth.yaml", []byte(legacy+keyed))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a.failures.Now = func() time.Time { return now }
	reg := prometheus.NewRegistry()
	if err := a.Register(reg); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	(&api.Server{Auth: a}).Register(mux)
	get := func(addr, token string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/api/v1/audit", nil) // no store: only authentication runs
		r.RemoteAddr = addr
		r.Header.Set("Authorization", "Bearer "+token)
		mux.ServeHTTP(w, r)
		return w
	}
	const flooder = "192.0.2.7:5555"
	for i := range faillimit.Burst {
		if w := get(flooder, randomToken()); w.Code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i+1, w.Code)
		}
	}
	checks := a.checks.Load()
	if checks != faillimit.Burst {
		t.Errorf("%d bcrypt comparisons for %d wrong tokens against one entry without a lookup key; want %d", checks, faillimit.Burst, faillimit.Burst)
	}
	for range 100 {
		w := get("192.0.2.7:"+fmt.Sprint(6000), randomToken()) // another port: the same address
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" || !bytes.Contains(w.Body.Bytes(), []byte("too many wrong bearer tokens")) {
			t.Fatalf("past the limit: %d, Retry-After %q, %s; want 429 with Retry-After", w.Code, w.Header().Get("Retry-After"), w.Body)
		}
	}
	if n := a.checks.Load(); n != checks {
		t.Errorf("100 wrong tokens past the limit cost %d bcrypt comparisons; want none", n-checks)
	}
	if w := get(flooder, "new-token-0123456789abc"); w.Code == http.StatusUnauthorized || w.Code == http.StatusTooManyRequests || w.Code == http.StatusForbidden {
		t.Errorf("a valid keyed token from the limited address: %d %s; want it authenticated", w.Code, w.Body)
	}
	if w := get("198.51.100.1:80", randomToken()); w.Code != http.StatusUnauthorized {
		t.Errorf("a wrong token from another address: %d, want 401", w.Code)
	}
	if got := testutil.ToFloat64(a.metrics.limited); got != 100 {
		t.Errorf("slicemeter_api_auth_rate_limited_total %v, want 100", got)
	}
	if got := testutil.ToFloat64(a.metrics.refusedVec.WithLabelValues(reasonWrong)); got != faillimit.Burst+1 {
		t.Errorf("slicemeter_api_auth_refused_total{reason=wrong_token} %v, want %d", got, faillimit.Burst+1)
	}
	now = now.Add(faillimit.Refill)
	if w := get(flooder, randomToken()); w.Code != http.StatusUnauthorized {
		t.Errorf("a wrong token once the limit refilled: %d, want 401", w.Code)
	}
}

// TestCacheExpires: a token proven is known for cacheTTL, then proven again.
func TestCacheExpires(t *testing.T) {
	a, err := Parse("auth.yaml", []byte(entries(t, tokensOf, true)))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a.now = func() time.Time { return now }
	for _, step := range []struct {
		after time.Duration
		want  int64
	}{{0, 1}, {time.Minute, 1}, {cacheTTL, 2}, {time.Minute, 2}} {
		now = now.Add(step.after)
		if _, err := a.Principal(request("Bearer ops-token-0123456789")); err != nil {
			t.Fatal(err)
		}
		if got := a.checks.Load(); got != step.want {
			t.Errorf("after %s: %d bcrypt comparisons, want %d", step.after, got, step.want)
		}
	}
}

// TestValidCallerDuringFlood: while clients send made-up tokens as fast as they can, a valid
// token's first check waits for no one's bcrypt: it is the only comparison made.
func TestValidCallerDuringFlood(t *testing.T) {
	a, err := Parse("auth.yaml", []byte(entries(t, tokensOf, true)))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					_, _ = a.Principal(from(fmt.Sprintf("10.1.0.%d:1", i), "Bearer "+randomToken()))
				}
			}
		}()
	}
	p, err := a.Principal(from("10.1.0.1:2", "Bearer dash-token-0123456789"))
	close(stop)
	wg.Wait()
	if err != nil || p.Name != "dash" {
		t.Fatalf("principal %+v, %v; want dash", p, err)
	}
	if n := a.checks.Load(); n != 1 {
		t.Errorf("%d bcrypt comparisons; want 1 (the valid token's)", n)
	}
}

// TestSharedLookupKey: entries whose lookup keys collide are each found (one bcrypt each at
// most), and a token of a key no entry has is refused as unknown_token without bcrypt.
func TestSharedLookupKey(t *testing.T) {
	tok := func(name, token string) Token {
		return Token{Name: name, Hash: []byte(hash(t, token)), Lookup: 7, Keyed: true, Principal: api.Principal{Role: api.RoleFinance}}
	}
	a := New([]Token{tok("a", "first-token-0123456789"), tok("b", "second-token-0123456789")}, nil)
	d := digest("second-token-0123456789")
	a.keyed = map[uint32][]int{binary.BigEndian.Uint32(d[:4]): {0, 1}} // both under the second's key
	if p, err := a.Principal(request("Bearer second-token-0123456789")); err != nil || p.Name != "b" {
		t.Fatalf("principal %+v, %v; want b", p, err)
	}
	if n := a.checks.Load(); n != 2 {
		t.Errorf("%d bcrypt comparisons; want 2 (both entries of the key)", n)
	}
	if _, err := a.Principal(request("Bearer first-token-0123456789")); !errors.Is(err, ErrBadToken) {
		t.Errorf("a token whose key no entry has: %v, want %v", err, ErrBadToken)
	}
	if got := testutil.ToFloat64(a.metrics.refusedVec.WithLabelValues(reasonUnknown)); got != 1 {
		t.Errorf("refused unknown_token %v, want 1", got)
	}
}

// TestConcurrentWrongTokensBounded: many wrong tokens at once from one address, against an
// entry without a lookup key, start at most the limit's bcrypt checks, not one each.
func TestConcurrentWrongTokensBounded(t *testing.T) {
	a, err := Parse("auth.yaml", []byte(entries(t, map[string]string{"old": "old-token-0123456789abc"}, false)))
	if err != nil {
		t.Fatal(err)
	}
	const clients = 200
	var wg sync.WaitGroup
	var limited atomic.Int64
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := a.Principal(from("192.0.2.9:1", "Bearer "+randomToken()))
			var rl *RateLimitedError
			if errors.As(err, &rl) {
				limited.Add(1)
			} else if !errors.Is(err, ErrBadToken) {
				t.Errorf("a wrong token: %v", err)
			}
		}()
	}
	wg.Wait()
	if n := a.checks.Load(); n > faillimit.Burst {
		t.Errorf("%d wrong tokens at once from one address cost %d bcrypt comparisons; want at most %d", clients, n, faillimit.Burst)
	}
	if n := limited.Load(); n != clients-faillimit.Burst {
		t.Errorf("%d answered 429; want %d", n, clients-faillimit.Burst)
	}
}
