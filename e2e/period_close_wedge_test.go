package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
)

// TestPeriodCloseAfterManualClose (issue 25, item 5): the month before last closed by hand
// from the samples, the service started afterwards closes last month by itself, with the bill
// the samples give. Before, its minutes were never attributed (the service started after them):
// the close failed at every pass with "43200 of its 43200 minutes are not attributed yet", an
// ERROR a minute, no metric, and every later month waited behind it. Now the close records the
// minutes it needs, the passes attribute them, and the close follows; the failure is counted
// and said once.
func TestPeriodCloseAfterManualClose(t *testing.T) {
	t.Parallel()
	db := localtest.Database(t, localtest.DatabaseOptions{Unmigrated: true})
	dsn := db.DSN
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	file := filepath.Join(scenarios, "mig-basic.yaml")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	again := filepath.Join(t.TempDir(), "mig-again.yaml") // other allocation ids
	if err := os.WriteFile(again, []byte(strings.Replace(string(b), "name: mig-basic", "name: mig-again", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	thisMonth := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	last, beforeLast := thisMonth.AddDate(0, -1, 0), thisMonth.AddDate(0, -2, 0)
	for i, start := range []time.Time{beforeLast.AddDate(0, 0, 1), last.AddDate(0, 0, 1)} {
		apptest.Demo(t, ctx, "--scenario", []string{file, again}[i], "--fast", "--sim.start", start.Format(time.RFC3339), "--clickhouse.dsn", dsn,
			"--web.listen-address", "127.0.0.1:0")
	}
	apptest.MustRun(t, ctx, "period", "close", beforeLast.Format("2006-01"), "--clickhouse.dsn", dsn, "--scenario", file)

	// close-after 1h: last month is due whatever the day (but in the first hour of a month).
	svc := apptest.StartAttribution(t, ctx, "--api.insecure-no-auth", "--clickhouse.dsn", dsn, "--scenario", file,
		"--billing.close-after", "1h", "--attribution.interval", "2s", "--attribution.max-minutes", "5000")
	month := last.Format("2006-01")
	var row []string
	apptest.WaitUntil(t, 6*time.Minute, "the service closes "+month, func() bool {
		r := apptest.Run(t, ctx, "period", "list", "--clickhouse.dsn", dsn)
		for _, line := range strings.Split(r.Stdout, "\n") {
			if strings.HasPrefix(line, month+",") {
				row = strings.Split(line, ",")
				return true
			}
		}
		return false
	})
	// period,version,timezone,window_start,window_end,closed_at,currency,list_cost,cost,…
	closedCost, _ := strconv.ParseFloat(row[8], 64)
	rep := apptest.Report(t, ctx, dsn, "--scenario", file, "--from", last.Format(time.RFC3339), "--to", thisMonth.Format(time.RFC3339))
	want := 0.0
	for tenant, cost := range sumColumn(t, rep.Stdout).cost {
		if !strings.HasPrefix(tenant, "__") {
			want += cost
		}
	}
	if want == 0 || closedCost-want > 1e-5 || want-closedCost > 1e-5 {
		t.Errorf("%s closed at cost %s; the report from the samples bills %.6f", month, row[8], want)
	}
	if v, ok := svc.Metric(`slicemeter_billing_close_failures_total{reason="not_attributed"}`); !ok || v < 1 {
		t.Errorf("slicemeter_billing_close_failures_total{reason=\"not_attributed\"} %v (%v): want the failed close counted", v, ok)
	}
	apptest.WaitUntil(t, time.Minute, "no period owed a close", func() bool {
		v, ok := svc.Metric("slicemeter_billing_close_pending_periods")
		return ok && v == 0
	})
	if !svc.LogContains("has minutes never attributed") || svc.LogContains("closing a billing period failed") {
		t.Errorf("want the close's missing minutes said once, no failure:\n%s", svc.LogTail(30))
	}
}
