package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
)

// TestAPIAuth: the attribution service through the real binary refuses to start without
// authentication configured (exit 2 naming the flags); with an auth file whose entries
// `slicemeter api token hash` made, no token is a 401 with a JSON error, a tenant asking for
// another tenant a 403, a tenant's unfiltered report (CSV and JSON) and allocations hold only
// its rows, and a scheduler writes allocations (its tenants', never moving one to another
// tenant) but cannot read reports; right-sizing advice holds only the tenant's own allocations;
// an overlap with another tenant's allocation is a 409 that
// names it to the operator, not to a scheduler scoped to other tenants.
func TestAPIAuth(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	file := filepath.Join(scenarios, "mig-basic.yaml") // tenants acme, beta and gamma
	if r := apptest.Run(t, ctx, "attribution", "--scenario", file, "--clickhouse.dsn", "clickhouse://127.0.0.1:1/none"); r.Code != 2 ||
		!strings.Contains(r.Stderr, "--api.auth-file") || !strings.Contains(r.Stderr, "--api.insecure-no-auth") {
		t.Errorf("attribution without authentication exited %d, want 2 naming the flags:\n%s", r.Code, r.Stderr)
	}

	tokens := map[string]string{"ops": "ops-0123456789abcdef", "acme": "acme-0123456789abcdef", "slurm": "slurm-0123456789abcdef", "k8s": "k8s-0123456789abcdef"}
	for _, token := range tokens {
		apptest.Secret(t, token)
	}
	entry := func(name, role, tenants string) string {
		r := apptest.RunInput(t, ctx, tokens[name]+"\n", "api", "token", "hash", "--name", name)
		if r.Code != 0 || strings.Contains(r.Stdout, tokens[name]) {
			t.Fatalf("api token hash exited %d (or printed the token):\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
		e := strings.Replace(r.Stdout, "role: tenant ", "role: "+role+" ", 1)
		return strings.Replace(e, "[TENANT]", tenants, 1)
	}
	authFile := filepath.Join(t.TempDir(), "auth.yaml")
	content := "tokens:\n" + entry("ops", "operator", "[]") + entry("acme", "tenant", "[acme]") + entry("slurm", "scheduler", "[delta]") + entry("k8s", "scheduler", "[]")
	content = strings.ReplaceAll(content, "    tenants: []     # for tenant; optional for scheduler\n", "")
	if err := os.WriteFile(authFile, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}

	dsn := localtest.Database(t, localtest.DatabaseOptions{Unmigrated: true}).DSN
	start := time.Now().UTC().Truncate(time.Minute).Add(-65 * time.Minute)
	apptest.Demo(t, ctx, "--no-attribution.store-minutes", "--scenario", file, "--fast", "--sim.start", start.Format(time.RFC3339), "--report", os.DevNull, "--clickhouse.dsn", dsn)
	svc := apptest.StartAttribution(t, ctx, "--api.auth-file", authFile, "--clickhouse.dsn", dsn, "--scenario", file, "--attribution.backfill", "5m")
	window := "from=" + start.Format(time.RFC3339) + "&to=" + start.Add(time.Hour).Format(time.RFC3339)

	do := func(method, path, token, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, svc.URL(path), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+tokens[token])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 400 {
			var p struct{ Error string }
			if json.Unmarshal(b, &p) != nil || p.Error == "" {
				t.Errorf("%s %s: %d with %q, want a JSON error", method, path, resp.StatusCode, b)
			}
		}
		return resp.StatusCode, string(b)
	}
	alloc := `{"allocation_id": "auth-1", "tenant": "delta", "tier": "pro", "node": "node-a", "instance_id": "gpu0/mig1",
		"requested_at": "` + start.Format(time.RFC3339) + `", "started_at": "` + start.Format(time.RFC3339) + `", "ended_at": "` + start.Add(time.Minute).Format(time.RFC3339) + `"}`
	overlapping := strings.NewReplacer(`"auth-1"`, `"auth-2"`, `"gpu0/mig1"`, `"gpu0/mig0"`).Replace(alloc)
	tests := []struct {
		name, method, path, token, body string
		status                          int
		has, hasNot                     []string
	}{
		{"no token", "GET", "/api/v1/report?" + window, "", "", 401, []string{"no bearer token"}, nil},
		{"no token allocations", "GET", "/api/v1/allocations", "", "", 401, nil, nil},
		{"operator sees all", "GET", "/api/v1/report?" + window, "ops", "", 200, []string{"\nacme,", "\nbeta,", "\n__unallocated__,"}, nil},
		{"tenant asks for another", "GET", "/api/v1/report?tenant=beta&" + window, "acme", "", 403, []string{`tenant \"beta\"`}, nil},
		{"tenant csv", "GET", "/api/v1/report?" + window, "acme", "", 200, []string{"\nacme,"}, []string{"\nbeta,", "\ngamma,", "__unallocated__"}},
		{"tenant json", "GET", "/api/v1/report?format=json&" + window, "acme", "", 200, []string{`"tenant": "acme"`},
			[]string{`"tenant": "beta"`, `"tenant": "gamma"`, "__unallocated__"}},
		{"tenant allocations", "GET", "/api/v1/allocations", "acme", "", 200, []string{`"tenant":"acme"`}, []string{`"tenant":"beta"`, `"tenant":"gamma"`}},
		{"tenant cannot write", "POST", "/api/v1/allocations", "acme", alloc, 403, nil, nil},
		{"scheduler writes its tenant", "POST", "/api/v1/allocations", "slurm", alloc, 200, []string{`"stored":["auth-1"]`}, nil},
		{"scheduler other tenant", "POST", "/api/v1/allocations", "slurm", strings.Replace(alloc, `"delta"`, `"acme"`, 1), 403, nil, nil},
		// acme holds gpu0/mig0: a scheduler of delta learns only that another tenant does.
		{"scheduler's overlap with another tenant", "POST", "/api/v1/allocations", "slurm", overlapping, 409,
			[]string{`allocation \"auth-2\" of tenant \"delta\"`, "overlaps an allocation of another tenant"}, []string{"acme", "mig-basic"}},
		{"operator's overlap", "POST", "/api/v1/allocations", "ops", overlapping, 409, []string{`of tenant \"acme\"`}, nil},
		{"scheduler of any tenant cannot move one", "POST", "/api/v1/allocations", "k8s", strings.Replace(alloc, `"delta"`, `"acme"`, 1), 403,
			[]string{`move allocation \"auth-1\" from tenant \"delta\" to \"acme\"`}, nil},
		{"scheduler cannot read reports", "GET", "/api/v1/report?" + window, "slurm", "", 403, []string{"may not read reports"}, nil},
		// Right-sizing: the operator's advice holds every tenant's allocations, a tenant's its own.
		{"operator's advice", "GET", "/api/v1/advice?min_measured=10m&" + window, "ops", "", 200,
			[]string{"\nmig-basic/acme/0,acme,", "\nmig-basic/beta/0,beta,", "\nmig-basic/gamma/0,gamma,"}, nil},
		{"tenant's advice", "GET", "/api/v1/advice?min_measured=10m&format=json&" + window, "acme", "", 200,
			[]string{`"tenant": "acme"`, `"advised_shape": "1g.5gb"`}, []string{`"tenant": "beta"`, `"tenant": "gamma"`}},
		{"tenant asks for another's advice", "GET", "/api/v1/advice?tenant=beta&" + window, "acme", "", 403, []string{"tenant beta"}, nil},
		{"scheduler cannot read advice", "GET", "/api/v1/advice?" + window, "slurm", "", 403, []string{"operator, finance and tenants only"}, nil},
	}
	for _, tt := range tests {
		code, body := do(tt.method, tt.path, tt.token, tt.body)
		if code != tt.status {
			t.Errorf("%s: %s %s: %d, want %d: %s", tt.name, tt.method, tt.path, code, tt.status, body)
			continue
		}
		for _, h := range tt.has {
			if !strings.Contains(body, h) {
				t.Errorf("%s: the answer lacks %q:\n%s", tt.name, h, body)
			}
		}
		for _, h := range tt.hasNot {
			if strings.Contains(body, h) {
				t.Errorf("%s: the answer has %q:\n%s", tt.name, h, body)
			}
		}
	}
	for _, secret := range tokens {
		if strings.Contains(svc.Log(), secret) {
			t.Errorf("the service's log holds a token")
		}
	}
}
