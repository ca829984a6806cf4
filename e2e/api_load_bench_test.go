package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
)

// BenchmarkAPILoad measures the real attribution service (docs/api.md, "API authentication"):
// GET /api/v1/allocations from 50 concurrent clients for 30 s (after one request from each at
// once, the slowest of which is logged: a new token's bcrypt check), once with --api.insecure-no-auth
// and once with a static bearer token (tenant role), with each process's RSS at the end
// (VmRSS) and at its peak (VmHWM); then /healthz from one client while 2,000 connections
// from 4 other loopback addresses post a body one byte every 2 s (the slow-body attack), beside
// the same without the attack. It reports figures; it asserts none of them (a shared machine
// is noisy). SLICEMETER_LOAD_DURATION and SLICEMETER_LOAD_SLOW change the 30 s and the 2,000.
//
//	go test -run '^$' -bench APILoad -benchtime 1x -timeout 20m ./e2e/
func BenchmarkAPILoad(b *testing.B) {
	duration := 30 * time.Second
	if d, err := time.ParseDuration(os.Getenv("SLICEMETER_LOAD_DURATION")); err == nil {
		duration = d
	}
	slow := 2000
	if n, err := strconv.Atoi(os.Getenv("SLICEMETER_LOAD_SLOW")); err == nil {
		slow = n
	}
	const clients = 50
	ctx, cancel := context.WithTimeout(context.Background(), 4*duration+5*time.Minute)
	defer cancel()
	db := localtest.Database(b, localtest.DatabaseOptions{})
	file := filepath.Join(scenarios, "mig-basic.yaml")
	const token = "load-acme-0123456789abcdef"
	apptest.Secret(b, token)
	r := apptest.RunInput(b, ctx, token+"\n", "api", "token", "hash", "--name", "acme")
	if r.Code != 0 {
		b.Fatalf("api token hash: %d %s", r.Code, r.Stderr)
	}
	authFile := filepath.Join(b.TempDir(), "auth.yaml")
	if err := os.WriteFile(authFile, []byte("tokens:\n"+strings.Replace(r.Stdout, "[TENANT]", "[acme]", 1)), 0o600); err != nil {
		b.Fatal(err)
	}
	// A few allocations to list, acme's among them.
	var allocs []string
	for i := range 20 {
		tenant := []string{"acme", "beta"}[i%2]
		at := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Hour).Format(time.RFC3339)
		allocs = append(allocs, fmt.Sprintf(`{"allocation_id": "load-%d", "tenant": %q, "tier": "pro", "node": "node-a", "instance_id": "gpu0/mig1", "requested_at": %q, "started_at": %q, "ended_at": %q}`,
			i, tenant, at, at, time.Date(2026, 1, 5, 0, 59, 0, 0, time.UTC).Add(time.Duration(i)*time.Hour).Format(time.RFC3339)))
	}
	allocFile := filepath.Join(b.TempDir(), "allocs.json")
	if err := os.WriteFile(allocFile, []byte("["+strings.Join(allocs, ",\n")+"]"), 0o600); err != nil {
		b.Fatal(err)
	}
	apptest.MustRun(b, ctx, "allocations", "import", "--clickhouse.dsn", db.DSN, allocFile)

	for _, mode := range []struct {
		name   string
		args   []string
		header string
	}{
		{"auth off", []string{"--api.insecure-no-auth"}, ""},
		{"auth on (static token)", []string{"--api.auth-file", authFile}, "Bearer " + token},
	} {
		svc := apptest.StartAttribution(b, ctx, append(mode.args, "--clickhouse.dsn", db.DSN, "--scenario", file)...)
		list := func(c *http.Client) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, svc.URL("/api/v1/allocations"), nil)
			if mode.header != "" {
				req.Header.Set("Authorization", mode.header)
			}
			return expect200(c.Do(req))
		}
		// A burst of one request from each client first: the first use of a static token
		// costs a bcrypt check (about 90 ms), later ones a SHA-256; the load after it
		// measures the steady state.
		burst := make(chan time.Duration, clients)
		for range clients {
			go func() {
				start := time.Now()
				if err := list(&http.Client{}); err != nil {
					b.Errorf("%s: GET /api/v1/allocations: %v", mode.name, err)
				}
				burst <- time.Since(start)
			}()
		}
		var slowest time.Duration
		for range clients {
			slowest = max(slowest, <-burst)
		}
		b.Logf("%s: the first request of %d clients at once: the slowest took %s", mode.name, clients, slowest.Round(time.Millisecond))
		lat, failed := load(ctx, clients, duration, list)
		rss, peak := memory(svc.Pid())
		b.Logf("%s: %d clients × %s: %d requests (%.0f/s), %d failed; latency p50 %s p99 %s max %s; RSS %d MiB, peak %d MiB",
			mode.name, clients, duration, len(lat), float64(len(lat))/duration.Seconds(), failed, pct(lat, 50), pct(lat, 99), pct(lat, 100), rss>>20, peak>>20)
		metric := strings.Fields(mode.name)[1] // off, on
		b.ReportMetric(float64(pct(lat, 50).Microseconds())/1000, "p50-ms-auth-"+metric)
		b.ReportMetric(float64(pct(lat, 99).Microseconds())/1000, "p99-ms-auth-"+metric)
		b.ReportMetric(float64(peak>>20), "peak-MiB-auth-"+metric)
		if err := svc.Stop(); err != nil {
			b.Errorf("stopping attribution: %v", err)
		}
	}

	// The slow-body attack against /healthz, without auth as the issue tried it: the POSTs'
	// bodies are read (with auth, a caller without a token is refused before its body is).
	svc := apptest.StartAttribution(b, ctx, "--api.insecure-no-auth", "--clickhouse.dsn", db.DSN, "--scenario", file)
	healthz := func(c *http.Client) error {
		reqCtx, cancel := context.WithTimeout(ctx, time.Second) // "answering within 1 s"
		defer cancel()
		req, _ := http.NewRequestWithContext(reqCtx, http.MethodGet, svc.URL("/healthz"), nil)
		return expect200(c.Do(req))
	}
	quiet, quietFailed := load(ctx, 1, duration/3, healthz)
	rssBefore, _ := memory(svc.Pid())
	attackCtx, stopAttack := context.WithCancel(ctx)
	open := slowBodies(attackCtx, svc.Addr(), slow, 4)
	time.Sleep(3 * time.Second) // let the connections open
	attacked, attackedFailed := load(ctx, 1, duration, healthz)
	rssAttacked, peak := memory(svc.Pid())
	stillOpen := open()
	stopAttack()
	b.Logf("/healthz alone: %d requests, %d failed or over 1 s; p50 %s p99 %s max %s; RSS %d MiB",
		len(quiet), quietFailed, pct(quiet, 50), pct(quiet, 99), pct(quiet, 100), rssBefore>>20)
	b.Logf("/healthz under %d slow-body connections (%d open at the end) from 4 addresses: %d requests, %d failed or over 1 s; p50 %s p99 %s max %s; RSS %d MiB, peak %d MiB",
		slow, stillOpen, len(attacked), attackedFailed, pct(attacked, 50), pct(attacked, 99), pct(attacked, 100), rssAttacked>>20, peak>>20)
	b.ReportMetric(float64(pct(attacked, 99).Microseconds())/1000, "healthz-p99-ms-attacked")
	b.ReportMetric(float64(attackedFailed), "healthz-failed-attacked")
}

// load runs f from n clients (each its own connection) for d, returning the latencies of the
// calls that succeeded and the count of those that failed.
func load(ctx context.Context, n int, d time.Duration, f func(*http.Client) error) ([]time.Duration, int) {
	var (
		mu     sync.Mutex
		all    []time.Duration
		failed int
		wg     sync.WaitGroup
	)
	end := time.Now().Add(d)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer c.CloseIdleConnections()
			var mine []time.Duration
			bad := 0
			for time.Now().Before(end) && ctx.Err() == nil {
				start := time.Now()
				if err := f(c); err != nil {
					bad++
					continue
				}
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			all, failed = append(all, mine...), failed+bad
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(all)
	return all, failed
}

func expect200(resp *http.Response, err error) error {
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// pct is the p-th percentile of sorted latencies (100: the maximum).
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)].Round(10 * time.Microsecond)
}

// memory is the process's resident set now and at its peak, in bytes (Linux /proc).
func memory(pid int) (rss, peak int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	return rss, peak
}

// slowBodies opens n connections to addr from 127.0.0.2 onwards (spread over addrs
// addresses) that each post a body one byte every 2 s until ctx ends; open reports how many
// are still open.
func slowBodies(ctx context.Context, addr string, n, addrs int) (open func() int) {
	var mu sync.Mutex
	alive := 0
	for i := range n {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%addrs))}}
		go func() {
			conn, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return
			}
			defer conn.Close()
			mu.Lock()
			alive++
			mu.Unlock()
			defer func() { mu.Lock(); alive--; mu.Unlock() }()
			if _, err := fmt.Fprintf(conn, "POST /api/v1/allocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"); err != nil {
				return
			}
			t := time.NewTicker(2 * time.Second)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if _, err := conn.Write([]byte("[")); err != nil {
						return
					}
				}
			}
		}()
	}
	return func() int { mu.Lock(); defer mu.Unlock(); return alive }
}
