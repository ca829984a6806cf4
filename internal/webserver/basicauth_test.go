package webserver

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/slicemeter/slicemeter/internal/faillimit"
)

// TestBasicAuthFlood: wrong passwords from one address cost a bcrypt check each up to the
// limit, then 429 with Retry-After and no bcrypt; a flood of wrong passwords from more
// addresses than the login cache holds never pushes a proven login out of it (its scrapes
// cost no bcrypt again); other addresses are not limited by one that is.
func TestBasicAuthFlood(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("scrape-pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(config, []byte("basic_auth_users:\n  prom: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newConfigHandler(config, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), nil, slog.New(slog.DiscardHandler))
	var checks atomic.Int64
	h.compare = func(hash, password []byte) error {
		checks.Add(1)
		return bcrypt.CompareHashAndPassword(hash, password)
	}
	get := func(addr, pass string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/metrics", nil)
		r.RemoteAddr = addr
		r.SetBasicAuth("prom", pass)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := get("192.0.2.10:1", "scrape-pw"); w.Code != http.StatusOK {
		t.Fatalf("the scraper: %d, want 200", w.Code)
	}
	// Many wrong passwords at once from one address start at most the limit's checks.
	const flooder = "192.0.2.66:1"
	codes := make(chan int, 100)
	var wg sync.WaitGroup
	for i := range cap(codes) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- get(flooder, fmt.Sprint("wrong-", i)).Code
		}()
	}
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	if count[http.StatusUnauthorized] != faillimit.Burst || count[http.StatusTooManyRequests] != cap(codes)-faillimit.Burst {
		t.Errorf("%d wrong passwords at once from one address: %v; want %d 401s, the rest 429", cap(codes), count, faillimit.Burst)
	}
	if n := checks.Load(); n > 1+faillimit.Burst {
		t.Errorf("%d wrong passwords at once cost %d bcrypt checks; want at most %d", cap(codes), n-1, faillimit.Burst)
	}
	before := checks.Load()
	for i := range 50 {
		w := get(flooder, fmt.Sprint("more-", i))
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
			t.Fatalf("past the limit: %d, Retry-After %q; want 429 with it", w.Code, w.Header().Get("Retry-After"))
		}
	}
	if n := checks.Load() - before; n != 0 {
		t.Errorf("50 wrong passwords past the limit cost %d bcrypt checks; want none", n)
	}
	// More addresses than the login cache holds, one wrong password each.
	for i := range maxKnownLogins + 100 {
		if w := get(fmt.Sprintf("10.2.%d.%d:1", i/250, i%250), "wrong"); w.Code != http.StatusUnauthorized {
			t.Fatalf("a wrong password from a new address: %d, want 401", w.Code)
		}
	}
	before = checks.Load()
	if w := get("192.0.2.10:2", "scrape-pw"); w.Code != http.StatusOK {
		t.Fatalf("the scraper after the flood: %d, want 200", w.Code)
	}
	if n := checks.Load() - before; n != 0 {
		t.Errorf("the proven login after a flood of wrong ones cost %d bcrypt checks; want 0 (the cache)", n)
	}
}
