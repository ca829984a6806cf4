package e2e

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
)

// TestFreshInstallAnswers (issue 25, item 4): an attribution service started over a database
// that holds samples of the previous month and of this one (the collector ran before the
// service) answers a tenant's statement of both months at once, with the figures the CLI
// computes from the samples. Before, it attributed only the last hour at start and answered
// 500 ("statement of acme for …: statement of acme for …: 1440 of its 1440 minutes are not
// attributed yet"). It also says at start that it attributes the open billing period.
func TestFreshInstallAnswers(t *testing.T) {
	t.Parallel()
	dsn := localtest.Database(t, localtest.DatabaseOptions{Unmigrated: true}).DSN
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	file := filepath.Join(scenarios, "mig-basic.yaml") // one hour
	now := time.Now().UTC()
	thisMonth := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	earlier := thisMonth.AddDate(0, -1, 1)                  // the 2nd of the previous month
	recent := now.Add(-2 * time.Hour).Truncate(time.Minute) // this month, unless it began within 2 hours
	// The same scenario under another name: other allocation ids, so that the second run's
	// allocations do not replace the first's.
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	again := filepath.Join(t.TempDir(), "mig-again.yaml")
	if err := os.WriteFile(again, []byte(strings.Replace(string(b), "name: mig-basic", "name: mig-again", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, start := range []time.Time{earlier, recent} {
		apptest.Demo(t, ctx, "--scenario", []string{file, again}[i], "--fast", "--sim.start", start.Format(time.RFC3339), "--clickhouse.dsn", dsn,
			"--web.listen-address", "127.0.0.1:0")
	}
	svc := apptest.StartAttribution(t, ctx, "--api.insecure-no-auth", "--clickhouse.dsn", dsn, "--scenario", file)
	totalCost := regexp.MustCompile(`data-total="cost">([^<]*)<`)
	for _, m := range []time.Time{earlier, recent} {
		month := m.Format("2006-01")
		resp, err := http.Get(svc.URL("/api/v1/statement?tenant=acme&period=" + month))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("statement of %s: %d %s\n%s", month, resp.StatusCode, b, svc.LogTail(20))
		}
		cli := apptest.Run(t, ctx, "statement", "--tenant", "acme", "--period", month, "--clickhouse.dsn", dsn, "--scenario", file)
		if cli.Code != 0 {
			t.Fatalf("statement of %s from the CLI exited %d: %s", month, cli.Code, cli.Stderr)
		}
		api, want := totalCost.FindStringSubmatch(string(b)), totalCost.FindStringSubmatch(cli.Stdout)
		if api == nil || want == nil || api[1] != want[1] || want[1] == "0.000000" {
			t.Errorf("statement of %s: the service's cost %v, the CLI's from the samples %v; want the same, not 0", month, api, want)
		}
	}
	// The open period's minutes are owed either by the backfill or, when the allocations reach
	// the service after its start (as here, under load), by the recomputation they make: either
	// way the service says that it attributes them.
	if !svc.LogContains("attributing the minutes of the open billing period that were never attributed") &&
		!svc.LogContains("allocations received late: the stored minutes are attributed again") {
		t.Errorf("the service does not say that it attributes the open billing period:\n%s", svc.LogTail(20))
	}
}
