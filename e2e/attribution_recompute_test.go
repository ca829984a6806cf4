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
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// TestAttributionRecomputationSurvivesRestarts: the real service stores an hour of minutes;
// then gamma's GPU is ended at 5m and delta's allocation created from then on, received late,
// with 10 minutes a pass. The service is stopped with SIGTERM once the recomputation has come
// part of the way, killed with SIGKILL once it came further, and started again: it finishes,
// and `report --from-minutes` equals the report from the raw samples minute by minute, with no
// minute missing. Then stored minutes are deleted: the service finds the holes, its missing
// minutes gauge shows them, and it attributes them again.
func TestAttributionRecomputationSurvivesRestarts(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	db := localtest.Database(t, localtest.DatabaseOptions{Unmigrated: true})
	file := filepath.Join(scenarios, "mig-basic.yaml")
	start := time.Now().UTC().Truncate(time.Minute).Add(-61 * time.Minute)
	end := start.Add(time.Hour)
	apptest.Demo(t, ctx, "--no-attribution.store-minutes", "--scenario", file, "--fast", "--sim.start", start.Format(time.RFC3339), "--report", os.DevNull,
		"--clickhouse.dsn", db.DSN, "--web.listen-address", "127.0.0.1:0")
	args := func(maxMinutes string) []string {
		return []string{"--api.insecure-no-auth", "--clickhouse.dsn", db.DSN, "--scenario", file, "--attribution.interval", "2s",
			"--attribution.delay", "0s", "--attribution.backfill", "2h", "--attribution.max-minutes", maxMinutes}
	}
	count := func(query string, args ...any) uint64 {
		t.Helper()
		var n uint64
		if err := db.Conn.QueryRow(ctx, query, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		return n
	}
	metric := func(p *apptest.Process, name string) string {
		t.Helper()
		resp, err := http.Get(p.URL("/metrics"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, name+" ") {
				return strings.TrimPrefix(l, name+" ")
			}
		}
		return ""
	}
	waitFor := func(p *apptest.Process, what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(4 * time.Minute); !ok(); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 4 minutes\n%s", what, p.LogTail(30))
			}
		}
	}
	minutesStored := func() uint64 {
		return count("SELECT uniqExact(minute) FROM "+tables.AttributionMinutes+" WHERE minute >= toDateTime(?) AND minute < toDateTime(?)",
			start.Unix(), end.Unix())
	}

	svc := apptest.StartAttribution(t, ctx, args("120")...)
	for _, g := range []string{"slicemeter_attribution_stale_seconds", "slicemeter_attribution_missing_seconds"} {
		if v := metric(svc, g); v != "0" {
			t.Errorf("%s at start: %q, want 0", g, v)
		}
	}
	waitFor(svc, "the hour stored", func() bool { return minutesStored() >= 60 })
	if err := svc.Stop(); err != nil {
		t.Fatal(err)
	}

	// The late change, as the allocations table receives it.
	var gamma struct {
		id, tier, node, instance string
		requested, started       int64
		version                  uint64
	}
	if err := db.Conn.QueryRow(ctx, "SELECT allocation_id, tier, node, instance_id, requested_ns, started_ns, version FROM allocations WHERE tenant = 'gamma' ORDER BY version DESC LIMIT 1").
		Scan(&gamma.id, &gamma.tier, &gamma.node, &gamma.instance, &gamma.requested, &gamma.started, &gamma.version); err != nil {
		t.Fatal(err)
	}
	change := start.Add(5 * time.Minute)
	batch, err := db.Conn.PrepareBatch(ctx, tables.Insert(tables.Allocations, tables.AllocationColumns))
	if err != nil {
		t.Fatal(err)
	}
	received := time.Now().UTC().Truncate(time.Second)
	if err := batch.Append(gamma.id, "gamma", gamma.tier, gamma.node, gamma.instance, gamma.requested, gamma.started, change.UnixNano(), gamma.version+1, uint8(0), received); err != nil {
		t.Fatal(err)
	}
	if err := batch.Append("late-delta", "delta", gamma.tier, gamma.node, gamma.instance, change.UnixNano(), change.UnixNano(), end.UnixNano(), uint64(1), uint8(0), received); err != nil {
		t.Fatal(err)
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	progress := func() uint64 {
		return count("SELECT count() FROM " + tables.Recomputations + " WHERE node = '' AND next_ns > from_ns")
	}

	// SIGTERM once a pass recorded progress, SIGKILL after the next.
	svc = apptest.StartAttribution(t, ctx, args("10")...)
	waitFor(svc, "a recorded recomputation with progress", func() bool { return progress() >= 1 })
	if v := metric(svc, "slicemeter_attribution_stale_seconds"); v == "0" || v == "" {
		t.Errorf("stale minutes gauge while recomputing: %q", v)
	}
	if err := svc.Stop(); err != nil {
		t.Fatal(err)
	}
	svc = apptest.StartAttribution(t, ctx, args("10")...)
	waitFor(svc, "more progress", func() bool { return progress() >= 2 })
	svc.Kill()
	svc = apptest.StartAttribution(t, ctx, args("10")...)
	open := "SELECT count() FROM (SELECT id FROM " + tables.Recomputations + " WHERE node = '' GROUP BY id HAVING argMax(next_ns, updated_ns) < argMax(to_ns, updated_ns))"
	waitFor(svc, "the recomputation done", func() bool { return count(open) == 0 && metric(svc, "slicemeter_attribution_stale_seconds") == "0" })
	sameAsRaw(t, ctx, db.DSN, file, start, end)

	// Holes: deleted minutes are found and attributed again.
	where := "minute >= toDateTime(?) AND minute < toDateTime(?)"
	if err := db.Conn.Exec(ctx, "ALTER TABLE "+tables.AttributionMinutes+" DELETE WHERE "+where, start.Add(20*time.Minute).Unix(), start.Add(23*time.Minute).Unix()); err != nil {
		t.Fatal(err)
	}
	waitFor(svc, "the deleted minutes gone", func() bool {
		return count("SELECT count() FROM "+tables.AttributionMinutes+" WHERE "+where, start.Add(20*time.Minute).Unix(), start.Add(23*time.Minute).Unix()) == 0
	})
	if err := svc.Stop(); err != nil {
		t.Fatal(err)
	}
	svc = apptest.StartAttribution(t, ctx, args("10")...)
	waitFor(svc, "the holes recorded", func() bool {
		return count("SELECT count() FROM "+tables.Recomputations+" WHERE reason = 'missing' AND from_ns = ?", start.Add(20*time.Minute).UnixNano()) > 0
	})
	waitFor(svc, "the holes attributed", func() bool { return count(open) == 0 && minutesStored() >= 60 })
	sameAsRaw(t, ctx, db.DSN, file, start, end)
	if !svc.LogContains("stored minutes with no stored pass") {
		t.Errorf("the service did not log the holes:\n%s", svc.LogTail(30))
	}
}

// sameAsRaw: the report from the stored minutes equals the one from the raw samples, minute by
// minute, and none of the minutes is missing (a missing one fails the former).
func sameAsRaw(t *testing.T, ctx context.Context, dsn, file string, from, to time.Time) {
	t.Helper()
	base := []string{"report", "--clickhouse.dsn", dsn, "--scenario", file, "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339), "--step", "1m"}
	raw := apptest.Run(t, ctx, append(base, "--attribution.samples", "raw")...)
	minutes := apptest.Run(t, ctx, append(base, "--from-minutes")...)
	if raw.Code != 0 || minutes.Code != 0 {
		t.Fatalf("report exited %d, --from-minutes %d:\n%s\n%s", raw.Code, minutes.Code, raw.Stderr, minutes.Stderr)
	}
	if raw.Stdout != minutes.Stdout {
		t.Errorf("the stored minutes differ from the raw samples:\n--- raw\n%s\n--- from minutes\n%s", raw.Stdout, minutes.Stdout)
	}
}
