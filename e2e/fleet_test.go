package e2e

import (
	"context"
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

// TestFleetAPI: the fleet-economics scenario through the real binaries (demo, then the
// attribution service with an auth file): GET /api/v1/fleet answers the operator and finance
// roles with node-a's six tenants and the A100's stranded slice, refuses a tenant and a
// scheduler (403) and a caller without a token (401), and says what `slicemeter fleet` says.
func TestFleetAPI(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	file := filepath.Join("..", "attribution", "fleet", "testdata", "fleet-economics.yaml")
	tokens := map[string]string{"ops": "ops-0123456789abcdef", "fin": "fin-0123456789abcdef", "acme": "acme-0123456789abcdef", "slurm": "slurm-0123456789abcdef"}
	roles := map[string][2]string{"ops": {"operator", ""}, "fin": {"finance", ""}, "acme": {"tenant", "[acme]"}, "slurm": {"scheduler", "[acme]"}}
	content := "tokens:\n"
	for name, token := range tokens {
		apptest.Secret(t, token)
		r := apptest.RunInput(t, ctx, token+"\n", "api", "token", "hash", "--name", name)
		if r.Code != 0 {
			t.Fatalf("api token hash exited %d:\n%s", r.Code, r.Stderr)
		}
		e := strings.Replace(r.Stdout, "role: tenant ", "role: "+roles[name][0]+" ", 1)
		if roles[name][1] == "" {
			e = strings.ReplaceAll(e, "    tenants: [TENANT]     # for tenant; optional for scheduler\n", "")
		}
		content += strings.Replace(e, "[TENANT]", roles[name][1], 1)
	}
	authFile := filepath.Join(t.TempDir(), "auth.yaml")
	if err := os.WriteFile(authFile, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}

	db := localtest.Database(t, localtest.DatabaseOptions{Unmigrated: true})
	start := time.Now().UTC().Truncate(time.Minute).Add(-61 * time.Minute)
	apptest.Demo(t, ctx, "--no-attribution.store-minutes", "--scenario", file, "--fast", "--sim.start", start.Format(time.RFC3339), "--report", os.DevNull,
		"--clickhouse.dsn", db.DSN, "--web.listen-address", "127.0.0.1:0")
	svc := apptest.StartAttribution(t, ctx, "--api.auth-file", authFile, "--clickhouse.dsn", db.DSN, "--scenario", file,
		"--attribution.interval", "1s", "--attribution.delay", "0s", "--attribution.backfill", "2h")
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(time.Second) {
		var minutes uint64
		if err := db.Conn.QueryRow(ctx, "SELECT uniqExact(minute) FROM attribution_minutes WHERE minute >= toDateTime(?) AND minute < toDateTime(?)",
			start.Unix(), start.Add(time.Hour).Unix()).Scan(&minutes); err != nil {
			t.Fatal(err)
		}
		if minutes >= 60 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("attribution stored %d of 60 minutes\n%s", minutes, svc.LogTail(20))
		}
	}
	window := "from=" + start.Format(time.RFC3339) + "&to=" + start.Add(time.Hour).Format(time.RFC3339)
	get := func(token, query string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", svc.URL("/api/v1/fleet?"+query), nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+tokens[token])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("fin", window)
	a100 := "\nA100-SXM4-40GB," + start.Format(time.RFC3339) + "," + start.Add(time.Hour).Format(time.RFC3339) + ",1.000000,0.714286,"
	if code != 200 || !strings.HasPrefix(body, "group,window_start,window_end,capacity_gpu_hours,") || !strings.Contains(body, a100) ||
		!strings.Contains(body, ",6,1,") || !strings.Contains(body, "\n__fleet__,") {
		t.Errorf("finance: %d\n%s\nwant the A100 row starting %q with 6 tenants on a host and 1 stranded slice", code, body, a100)
	}
	for _, tt := range []struct {
		token string
		code  int
	}{{"ops", 200}, {"acme", 403}, {"slurm", 403}, {"", 401}} {
		if got, b := get(tt.token, window+"&by=node&format=json"); got != tt.code {
			t.Errorf("%q: %d, want %d: %s", tt.token, got, tt.code, b)
		}
	}
	r := apptest.Run(t, ctx, "fleet", "--scenario", file, "--clickhouse.dsn", db.DSN, "--from", start.Format(time.RFC3339), "--to", start.Add(time.Hour).Format(time.RFC3339))
	if r.Code != 0 || r.Stdout != body {
		t.Errorf("slicemeter fleet exited %d:\n%s%s\nwant the API's answer:\n%s", r.Code, r.Stdout, r.Stderr, body)
	}
}
