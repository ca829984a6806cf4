package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
)

// costBudget is what the attribution service may hold at its peak (VmHWM) while every hostile
// request below is answered: the budget docs/api.md gives them ("Limits"). An idle service
// holds about 75 MB; the old code held 9.6 GB for the first request and 17 GB for the fleet.
const costBudget = 256 << 20

// TestHostileRequests sends the requests that made the old service hold gigabytes, and the
// widest window each role may ask, to every endpoint of the real attribution service, as the
// roles that may send them: each answers 400 within a second naming the parameter and the
// range or the limit, and the process's peak RSS stays under costBudget.
func TestHostileRequests(t *testing.T) {
	// In turn, not in parallel: it asserts each answer comes within 1 s, which another
	// test's load on the same cores would make.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tokens := map[string]string{"ops": "ops-cost-0123456789abcdef", "fin": "fin-cost-0123456789abcdef", "acme": "acme-cost-0123456789abcdef"}
	for _, token := range tokens {
		apptest.Secret(t, token)
	}
	entry := func(name, role, tenants string) string {
		r := apptest.RunInput(t, ctx, tokens[name]+"\n", "api", "token", "hash", "--name", name)
		if r.Code != 0 {
			t.Fatalf("api token hash exited %d:\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
		return strings.Replace(strings.Replace(r.Stdout, "role: tenant ", "role: "+role+" ", 1), "[TENANT]", tenants, 1)
	}
	authFile := filepath.Join(t.TempDir(), "auth.yaml")
	content := "tokens:\n" + entry("ops", "operator", "[]") + entry("fin", "finance", "[]") + entry("acme", "tenant", "[acme]")
	content = strings.ReplaceAll(content, "    tenants: []     # for tenant; optional for scheduler\n", "")
	if err := os.WriteFile(authFile, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	db := localtest.Database(t, localtest.DatabaseOptions{})
	svc := apptest.StartAttribution(t, ctx, "--api.auth-file", authFile, "--clickhouse.dsn", db.DSN,
		"--scenario", filepath.Join(scenarios, "mig-basic.yaml"), "--attribution.backfill", "5m")
	t.Logf("VmHWM after start: %d MiB", vmHWM(t, svc.Pid())>>20)

	const (
		y0001   = "from=0001-01-01T00:00:00Z&to=9999-12-31T00:00:00Z"
		widest  = "from=2000-01-01T00:00:00Z&to=2106-02-07T00:00:00Z" // the widest window any role may ask
		rangeIs = "2000-01-01T00:00:00Z to 2106-02-07T06:28:15Z"
	)
	tests := []struct {
		name, who, method, path, want string
	}{
		{"report_1m", "acme", "GET", "/api/v1/report?" + widest + "&step=1m", "55804320 windows; the limit is 10000"},
		{"report_1m_json_allocation", "acme", "GET", "/api/v1/report?" + widest + "&step=1m&format=json&by=allocation&source=minutes", "55804320 windows"},
		{"report_1s", "ops", "GET", "/api/v1/report?" + widest + "&step=1s", "3348259200 windows"},
		{"report_widest_hours", "fin", "GET", "/api/v1/report?" + widest + "&step=1h", "930072 windows"},
		{"report_widest_one_window", "ops", "GET", "/api/v1/report?from=2000-01-01T00:00:00Z&to=2106-02-07T06:28:16Z", "query parameter to"},
		{"report_year_0001", "acme", "GET", "/api/v1/report?" + y0001 + "&step=1m", "query parameter from"},
		{"focus_year_0001", "acme", "GET", "/api/v1/report?" + y0001 + "&format=focus", "query parameter from"},
		{"focus_widest", "ops", "GET", "/api/v1/report?" + widest + "&format=focus", "930072 windows"},
		{"focus_parquet_widest", "fin", "GET", "/api/v1/report?" + widest + "&format=focus&encoding=parquet", "930072 windows"},
		{"report_2610", "acme", "GET", "/api/v1/report?from=2026-01-01T00:00:00Z&to=2610-08-01T00:00:00Z", "query parameter to"},
		{"fleet_year_0001", "fin", "GET", "/api/v1/fleet?" + y0001, "query parameter from"},
		{"fleet_1900_2200", "fin", "GET", "/api/v1/fleet?from=1900-01-01T00:00:00Z&to=2200-01-01T00:00:00Z", "query parameter from"},
		// The fleet report stops at now: the widest window is cut there, and still refused.
		{"fleet_widest", "ops", "GET", "/api/v1/fleet?" + widest + "&by=gpu&format=json", "hours; the limit is 10000"},
		{"allocations_year_0001", "acme", "GET", "/api/v1/allocations?" + y0001, "query parameter from"},
		{"allocations_9999", "fin", "GET", "/api/v1/allocations?from=2026-01-01T00:00:00Z&to=9999-12-31T00:00:00Z", "query parameter to"},
		{"audit_year_0001", "ops", "GET", "/api/v1/audit?" + y0001, "query parameter from"},
		{"audit_1970", "fin", "GET", "/api/v1/audit?from=1970-01-01T00:00:00Z", "query parameter from"},
		{"statement_9999", "acme", "GET", "/api/v1/statement?period=9999-12", "query parameter period"},
		{"statement_0001", "fin", "GET", "/api/v1/statement?tenant=acme&period=0001-01", "query parameter period"},
		{"period_close_9999", "ops", "POST", "/api/v1/periods/9999-12/close", "path period"},
	}
	client := &http.Client{Timeout: 30 * time.Second}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctx, tt.method, svc.URL(tt.path), nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+tokens[tt.who])
			start := time.Now()
			resp, err := client.Do(req)
			took := time.Since(start)
			if err != nil {
				t.Fatalf("%s %s: %v after %s\n%s", tt.method, tt.path, err, took, svc.LogTail(20))
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			peak := vmHWM(t, svc.Pid())
			t.Logf("%s as %s: %d after %s, VmHWM %d MiB", tt.path, tt.who, resp.StatusCode, took.Round(time.Millisecond), peak>>20)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), tt.want) {
				t.Errorf("%s %s as %s: %d %s; want 400 naming %q", tt.method, tt.path, tt.who, resp.StatusCode, b, tt.want)
			}
			if strings.Contains(tt.want, "query parameter") || strings.Contains(tt.want, "path period") {
				if !strings.Contains(string(b), rangeIs) {
					t.Errorf("%s: the 400 does not name the range %q: %s", tt.path, rangeIs, b)
				}
			}
			if took > time.Second {
				t.Errorf("%s %s: answered after %s, want within 1s", tt.method, tt.path, took)
			}
			if peak > costBudget {
				t.Errorf("%s %s: the service's peak RSS is %d MiB, over the budget of %d MiB", tt.method, tt.path, peak>>20, costBudget>>20)
			}
		})
	}
}

// vmHWM is the peak resident set of process pid (/proc/PID/status VmHWM), in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading the service's memory: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/PID/status")
	return 0
}

// writeBudget is the peak RSS the attribution service may reach while 12 clients each POST
// 100,000 allocations at once: --api.max-concurrent-writes [4] are handled, the rest get 429
// before their bodies are read. The old code handled all 12 and held 1.6 GB.
const writeBudget = 1 << 30

// TestConcurrentWrites: 12 concurrent POSTs of 100,000 allocations each are answered 200 or
// 429 with Retry-After, and the service's peak RSS stays under writeBudget.
func TestConcurrentWrites(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	db := localtest.Database(t, localtest.DatabaseOptions{})
	svc := apptest.StartAttribution(t, ctx, "--api.insecure-no-auth", "--clickhouse.dsn", db.DSN,
		"--scenario", filepath.Join(scenarios, "mig-basic.yaml"), "--attribution.backfill", "5m")
	const clients, each = 12, 100000
	bodies := make([][]byte, clients)
	for c := range bodies {
		var b strings.Builder
		b.WriteString("[")
		for i := range each {
			if i > 0 {
				b.WriteString(",\n")
			}
			fmt.Fprintf(&b, `{"allocation_id":"w%d-%d","tenant":"acme","tier":"pro","node":"node-w","instance_id":"gpu-%d-%d",`+
				`"requested_at":"2026-01-05T00:00:00Z","started_at":"2026-01-05T00:00:00Z","ended_at":"2026-01-05T01:00:00Z"}`, c, i, c, i)
		}
		b.WriteString("]")
		bodies[c] = []byte(b.String())
	}
	type answer struct {
		code       int
		retryAfter string
		err        error
	}
	answers := make(chan answer, clients)
	start := make(chan struct{})
	for c := range clients {
		go func() {
			<-start
			req, err := http.NewRequestWithContext(ctx, "POST", svc.URL("/api/v1/allocations"), strings.NewReader(string(bodies[c])))
			if err != nil {
				answers <- answer{err: err}
				return
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				answers <- answer{err: err}
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			answers <- answer{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
		}()
	}
	began := time.Now()
	close(start)
	counts := map[int]int{}
	for range clients {
		a := <-answers
		switch {
		case a.err != nil:
			t.Errorf("a POST failed: %v\n%s", a.err, svc.LogTail(10))
		case a.code == http.StatusTooManyRequests && a.retryAfter == "":
			t.Error("a 429 without Retry-After")
		case a.code != http.StatusOK && a.code != http.StatusTooManyRequests:
			t.Errorf("a POST answered %d", a.code)
		}
		counts[a.code]++
	}
	peak := vmHWM(t, svc.Pid())
	t.Logf("%d concurrent POSTs of %d allocations: %v after %s, VmHWM %d MiB", clients, each, counts, time.Since(began).Round(time.Millisecond), peak>>20)
	if peak > writeBudget {
		t.Errorf("the service's peak RSS is %d MiB, over the budget of %d MiB", peak>>20, writeBudget>>20)
	}
}
