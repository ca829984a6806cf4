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

// TestUnpricedNeverStopsTheBill: mig-basic's fleet (an A100 with MIG and a whole H100; acme pro
// and beta budget on the A100, gamma pro on the H100) through the real binary, billed with a
// price book that prices only the A100 and knows only the pro tier. The report succeeds and
// bills acme as the scenario's own book does, beta (unknown tier) and gamma (unpriced model) are
// unpriced, said in a note on stderr and in the JSON's notes; `pricebook check` exits 2 naming
// both; the attribution service starts on that data, stores its minutes and counts the unpriced
// seconds; its API answers an error as a 5xx with a JSON body.
func TestUnpricedNeverStopsTheBill(t *testing.T) {
	t.Parallel()
	dsn := localtest.Database(t, localtest.DatabaseOptions{Unmigrated: true}).DSN
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	file := filepath.Join(scenarios, "mig-basic.yaml")
	// An hour that ended 5 minutes ago, so that the service's backfill reaches it.
	start := time.Now().UTC().Truncate(time.Minute).Add(-65 * time.Minute)
	apptest.Demo(t, ctx, "--no-attribution.store-minutes", "--scenario", file, "--fast", "--sim.start", start.Format(time.RFC3339), "--report", filepath.Join(t.TempDir(), "r.csv"),
		"--clickhouse.dsn", dsn)
	from, to := start.Format(time.RFC3339), start.Add(time.Hour).Format(time.RFC3339)
	book := filepath.Join(t.TempDir(), "a100-pro.yaml")
	if err := os.WriteFile(book, []byte("version: 1\ncurrency: USD\nprices: {A100-SXM4-40GB: 1.60}\ntiers: {pro: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	full := apptest.Report(t, ctx, dsn, "--scenario", file, "--from", from, "--to", to)
	partial := apptest.Report(t, ctx, dsn, "--pricebook", book, "--from", from, "--to", to)
	acme := func(csv string) string {
		for _, line := range strings.Split(csv, "\n") {
			if strings.HasPrefix(line, "acme,") {
				return line
			}
		}
		return ""
	}
	if a := acme(full.Stdout); a == "" || acme(partial.Stdout) != a {
		t.Errorf("acme's row with the partial book %q, want the full book's %q", acme(partial.Stdout), a)
	}
	if strings.Contains(partial.Stdout, "\nbeta,") || strings.Contains(partial.Stdout, "\ngamma,") {
		t.Errorf("an unpriced tenant is billed:\n%s", partial.Stdout)
	}
	for _, want := range []string{`unpriced: GPU model \"H100-SXM5-80GB\" has no price`, `unpriced: tier \"budget\" is not in the price book`} {
		if !strings.Contains(partial.Stderr, want) {
			t.Errorf("stderr lacks %s:\n%s", want, partial.Stderr)
		}
	}
	js := apptest.Report(t, ctx, dsn, "--pricebook", book, "--from", from, "--to", to, "--format", "json")
	var rows []struct {
		Tenant string   `json:"tenant"`
		Notes  []string `json:"notes"`
	}
	if err := json.Unmarshal([]byte(js.Stdout), &rows); err != nil || len(rows) != 2 || rows[1].Tenant != "__unallocated__" || len(rows[1].Notes) != 2 {
		t.Errorf("JSON report (%v): want acme and __unallocated__ with 2 notes:\n%s", err, js.Stdout)
	}

	if r := apptest.Run(t, ctx, "pricebook", "check", "--clickhouse.dsn", dsn, book); r.Code != 2 ||
		!strings.Contains(r.Stderr, `"H100-SXM5-80GB"`) || !strings.Contains(r.Stderr, `"budget"`) {
		t.Errorf("pricebook check exited %d, want 2 naming the H100 and the budget tier:\n%s", r.Code, r.Stderr)
	}

	svc := apptest.StartAttribution(t, ctx, "--api.insecure-no-auth", "--clickhouse.dsn", dsn, "--pricebook", book, "--attribution.backfill", "2h", "--attribution.max-minutes", "200")
	get := func(path string) (int, string, string) {
		t.Helper()
		resp, err := http.Get(svc.URL(path))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, _, body := get("/metrics")
		if strings.Contains(body, `slicemeter_attribution_unpriced_seconds_total{kind="model",name="H100-SXM5-80GB"}`) &&
			strings.Contains(body, `slicemeter_attribution_unpriced_seconds_total{kind="tier",name="budget"}`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no unpriced seconds counted within 2 minutes:\n%s\n%s", body, svc.LogTail(20))
		}
		time.Sleep(500 * time.Millisecond)
	}
	code, _, body := get("/api/v1/report?from=" + from + "&to=" + to + "&format=json&source=minutes")
	if code != 200 || !strings.Contains(body, `"tenant": "acme"`) || strings.Contains(body, `"tenant": "gamma"`) {
		t.Errorf("report from the stored minutes: %d %s\n%s", code, body, svc.LogTail(20))
	}
	// A window the service has not attributed: an error, as JSON.
	code, ctype, body := get("/api/v1/report?from=2020-01-01T00:00:00Z&to=2020-01-01T01:00:00Z&source=minutes")
	var problem struct{ Error string }
	if code < 500 || ctype != "application/json" || json.Unmarshal([]byte(body), &problem) != nil || problem.Error == "" {
		t.Errorf("report of a window not attributed: %d (%s) %q; want a 5xx with a JSON error", code, ctype, body)
	}
}
