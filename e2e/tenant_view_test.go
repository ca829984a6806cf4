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

// TestTenantSeesNoNeighbourName: on one time-sliced H100 shared by t1, t2, t3 (busy) and t4
// (idle), t1's JSON report through the real service says that a co-tenant was in its way
// (noisy_neighbour "another tenant") and how much (noisy_neighbour_share), never which; the
// operator's names it.
//
//	go test -count=1 -run TestTenantSeesNoNeighbourName ./e2e/
func TestTenantSeesNoNeighbourName(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	file := filepath.Join(scenarios, "vgpu-timeslice.yaml")
	sc := loadScenario(t, file)
	tokens := map[string]string{"ops": "ops-view-0123456789abcdef", "t1": "t1-view-0123456789abcdef"}
	for _, token := range tokens {
		apptest.Secret(t, token)
	}
	entry := func(name, role, tenants string) string {
		r := apptest.RunInput(t, ctx, tokens[name]+"\n", "api", "token", "hash", "--name", name)
		if r.Code != 0 {
			t.Fatalf("api token hash exited %d:\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
		e := strings.Replace(r.Stdout, "role: tenant ", "role: "+role+" ", 1)
		return strings.Replace(e, "[TENANT]", tenants, 1)
	}
	content := "tokens:\n" + entry("ops", "operator", "[]") + entry("t1", "tenant", "[t1]")
	authFile := filepath.Join(t.TempDir(), "auth.yaml")
	if err := os.WriteFile(authFile, []byte(strings.ReplaceAll(content, "    tenants: []     # for tenant; optional for scheduler\n", "")), 0o600); err != nil {
		t.Fatal(err)
	}
	dsn := localtest.Database(t, localtest.DatabaseOptions{Unmigrated: true}).DSN
	apptest.Demo(t, ctx, "--no-attribution.store-minutes", "--scenario", file, "--fast", "--report", os.DevNull, "--clickhouse.dsn", dsn)
	svc := apptest.StartAttribution(t, ctx, "--api.auth-file", authFile, "--clickhouse.dsn", dsn, "--scenario", file, "--attribution.backfill", "5m")

	report := func(token string) []map[string]any {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", svc.URL("/api/v1/report?format=json&from="+sc.Start.Format(time.RFC3339)+"&to="+sc.End().Format(time.RFC3339)), nil)
		req.Header.Set("Authorization", "Bearer "+tokens[token])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var rows []map[string]any
		if resp.StatusCode != 200 || json.Unmarshal(b, &rows) != nil {
			t.Fatalf("report as %s: %d %s", token, resp.StatusCode, b)
		}
		if token == "t1" {
			for _, other := range []string{"t2", "t3", "t4"} {
				if strings.Contains(string(b), `"`+other+`"`) {
					t.Errorf("t1's report names %s:\n%s", other, b)
				}
			}
		}
		return rows
	}
	row := func(rows []map[string]any, tenant string) map[string]any {
		for _, r := range rows {
			if r["tenant"] == tenant {
				return r
			}
		}
		t.Fatalf("no row of %s in %v", tenant, rows)
		return nil
	}
	mine := row(report("t1"), "t1")
	share, _ := mine["noisy_neighbour_share"].(float64)
	if mine["noisy_neighbour"] != "another tenant" || share <= 0 || share > 1 {
		t.Errorf("t1 reads noisy_neighbour %v, share %v; want \"another tenant\" and a share in (0, 1]", mine["noisy_neighbour"], mine["noisy_neighbour_share"])
	}
	ops := row(report("ops"), "t1")
	if n := ops["noisy_neighbour"]; n != "t2" && n != "t3" || ops["noisy_neighbour_share"] != mine["noisy_neighbour_share"] {
		t.Errorf("the operator reads t1's noisy_neighbour %v, share %v; want t2 or t3 and t1's share %v", n, ops["noisy_neighbour_share"], share)
	}
}
