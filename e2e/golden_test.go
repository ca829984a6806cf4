package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// goldenDir holds, per public scenario, every report the binary makes of it, as committed.
const goldenDir = "testdata/golden"

var updateGolden = flag.Bool("update", false, "rewrite "+goldenDir+" from this run's outputs (or SLICEMETER_UPDATE_GOLDEN=1)")

// updating says whether this run rewrites the golden files instead of comparing with them.
func updating() bool { return *updateGolden || os.Getenv("SLICEMETER_UPDATE_GOLDEN") == "1" }

// TestGoldenReports keeps the binary's reports of every public scenario byte for byte: the
// demo's (CSV and JSON), `report` by tenant and by allocation in CSV and JSON from each
// source of the samples (raw, rollup-1s, rollup-1m) and from the minutes the attribution
// service stored (--from-minutes), a report with --step, and the FOCUS export (CSV, Parquet
// and the metadata file). A refactoring that changes any of them fails here, naming the file
// and its first differing line. After a change meant to alter a report:
//
//	go test -count=1 -run TestGoldenReports ./e2e/ -update    (or SLICEMETER_UPDATE_GOLDEN=1)
//
// and review the diff of e2e/testdata/golden.
//
// The scenarios overlap in time (and name nodes alike), so each has databases of its own on
// the one shared ClickHouse server; the scenarios run in parallel.
func TestGoldenReports(t *testing.T) {
	ch := localtest.ClickHouse(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel) // after the parallel subtests, which run once this function returned
	files := scenarioFiles(t)
	var names []string
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		names = append(names, name)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := goldenOutputs(t, ctx, ch, file)
			checkGolden(t, filepath.Join(goldenDir, name), got)
		})
	}
	t.Cleanup(func() { checkNoStaleScenarios(t, names) })
}

// goldenOutputs runs the binary on a scenario file and returns its outputs by golden file name.
func goldenOutputs(t *testing.T, ctx context.Context, ch *local.ClickHouse, file string) map[string][]byte {
	sc := loadScenario(t, file)
	out := map[string][]byte{}
	tmp := t.TempDir()

	// The scenario at its own time: the demo's report, then `report` over what it stored.
	db := localtest.Database(t, localtest.DatabaseOptions{Server: ch, Unmigrated: true})
	apptest.Demo(t, ctx, "--no-attribution.store-minutes", "--scenario", file, "--fast", "--clickhouse.dsn", db.DSN, "--report", filepath.Join(tmp, "demo.csv"))
	out["demo.csv"] = readFile(t, filepath.Join(tmp, "demo.csv"))
	window := scenarioWindow(file, sc)
	for _, samples := range []string{"raw", "rollup-1s", "rollup-1m"} {
		for _, by := range []string{"tenant", "allocation"} {
			for _, format := range []string{"csv", "json"} {
				r := apptest.Report(t, ctx, db.DSN, append(window, "--attribution.samples", samples, "--by", by, "--format", format)...)
				out[fmt.Sprintf("report.%s.%s.%s", samples, by, format)] = []byte(r.Stdout)
			}
		}
	}
	out["report.raw.tenant.step-15m.csv"] = []byte(apptest.Report(t, ctx, db.DSN, append(window, "--step", "15m")...).Stdout)
	meta := filepath.Join(tmp, "focus.metadata.json")
	out["focus.csv"] = []byte(apptest.Report(t, ctx, db.DSN, append(window, "--format", "focus", "--focus.metadata", meta)...).Stdout)
	out["focus.metadata.json"] = creationDate.ReplaceAll(readFile(t, meta), []byte(`${1}"CREATION-DATE"`))
	out["focus.parquet"] = []byte(apptest.Report(t, ctx, db.DSN, append(window, "--format", "focus", "--focus.file-format", "parquet")...).Stdout)

	// The attribution service attributes only minutes near the wall clock (its backfill), so
	// for the stored minutes the scenario is moved to have ended at the latest whole hour: a
	// whole number of hours, so that every minute and hour keeps its place in the hour and
	// day. Its outputs are moved back by as much, and compare with the files of the scenario
	// at its own time. The demo's JSON report comes from this run (a second demo into the
	// first database would store every sample twice).
	hours := sc.Duration.Truncate(time.Hour)
	if hours < sc.Duration {
		hours += time.Hour
	}
	start := time.Now().UTC().Truncate(time.Hour).Add(-hours)
	shift := start.Sub(sc.Start)
	moved := localtest.Database(t, localtest.DatabaseOptions{Server: ch, Name: localtest.DatabaseName(t) + "_moved", Unmigrated: true})
	apptest.Demo(t, ctx, "--no-attribution.store-minutes", "--scenario", file, "--fast", "--sim.start", start.Format(time.RFC3339), "--clickhouse.dsn", moved.DSN,
		"--format", "json", "--report", filepath.Join(tmp, "demo.json"))
	out["demo.json"] = moveTimes(readFile(t, filepath.Join(tmp, "demo.json")), -shift)
	// The backfill reaches the moved start from now; one pass takes all of it.
	backfill := time.Since(start).Truncate(time.Minute) + 15*time.Minute
	svc := apptest.StartAttribution(t, ctx, "--api.insecure-no-auth", "--clickhouse.dsn", moved.DSN, "--scenario", file,
		"--attribution.interval", "1s", "--attribution.delay", "0s", "--attribution.backfill", backfill.String(),
		"--attribution.max-minutes", strconv.Itoa(int(backfill/time.Minute)+60))
	waitStoredMinutes(t, ctx, moved, start, start.Add(sc.Duration), svc)
	if err := svc.Stop(); err != nil { // its last pass and the hours rolled up from it are stored
		t.Fatalf("attribution service did not stop cleanly: %v\n%s", err, svc.LogTail(30))
	}
	movedWindow := []string{"--scenario", file, "--from", start.Format(time.RFC3339), "--to", start.Add(sc.Duration).Format(time.RFC3339)}
	for _, by := range []string{"tenant", "allocation"} {
		for _, format := range []string{"csv", "json"} {
			r := apptest.Report(t, ctx, moved.DSN, append(movedWindow, "--from-minutes", "--by", by, "--format", format)...)
			out[fmt.Sprintf("report.from-minutes.%s.%s", by, format)] = moveTimes([]byte(r.Stdout), -shift)
		}
	}
	return out
}

// creationDate is the FOCUS metadata's creation time and (FOCUS 1.3) its recency's update
// times, the only things in the files that are the wall clock's.
var creationDate = regexp.MustCompile(`("(?:CreationDate|RecencyLastUpdated|DatasetInstanceLastUpdated|TimeSectorLastUpdated)"\s*:\s*)"[^"]*"`)

// timestamp is an RFC 3339 time in UTC as the reports write them.
var timestamp = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)

// moveTimes moves every timestamp in b by d, keeping its format.
func moveTimes(b []byte, d time.Duration) []byte {
	return timestamp.ReplaceAllFunc(b, func(s []byte) []byte {
		at, err := time.Parse(time.RFC3339Nano, string(s))
		if err != nil {
			return s
		}
		layout := "2006-01-02T15:04:05Z"
		if i := bytes.IndexByte(s, '.'); i >= 0 {
			layout = "2006-01-02T15:04:05." + strings.Repeat("0", len(s)-i-2) + "Z"
		}
		return []byte(at.Add(d).UTC().Format(layout))
	})
}

// waitStoredMinutes waits until the service stored every minute of [from, to).
func waitStoredMinutes(t *testing.T, ctx context.Context, db *localtest.DB, from, to time.Time, svc *apptest.Process) {
	t.Helper()
	want := uint64(to.Sub(from) / time.Minute)
	for deadline := time.Now().Add(4 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		var n uint64
		if err := db.Conn.QueryRow(ctx, "SELECT uniqExact(minute) FROM "+tables.AttributionMinutes+" WHERE minute >= toDateTime(?) AND minute < toDateTime(?)",
			from.Unix(), to.Unix()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d minutes stored within 4 minutes\n%s", n, want, svc.LogTail(30))
		}
	}
}

// checkGolden compares got with the files of dir, or, updating, writes them (and removes the
// files of dir that got lacks).
func checkGolden(t *testing.T, dir string, got map[string][]byte) {
	t.Helper()
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range got {
			if !yield(n) {
				return
			}
		}
	})
	entries, err := os.ReadDir(dir)
	if err != nil && !(updating() && os.IsNotExist(err)) {
		t.Fatalf("reading the golden files: %v (write them with -update)", err)
	}
	if updating() {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if _, ok := got[e.Name()]; !ok {
				if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), got[n], 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("wrote %d golden files in %s", len(names), dir)
		return
	}
	for _, e := range entries {
		if _, ok := got[e.Name()]; !ok {
			t.Errorf("%s: no longer made by the test (remove it with -update)", filepath.Join(dir, e.Name()))
		}
	}
	for _, n := range names {
		path := filepath.Join(dir, n)
		want, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%v (write it with -update)", err)
			continue
		}
		if d := goldenDifference(got[n], want); d != "" {
			t.Errorf("%s differs from this run's output: %s", path, d)
		}
	}
}

// goldenDifference describes where got and want first differ ("" if they do not): the line
// of a text file, the byte offset of a binary one.
func goldenDifference(got, want []byte) string {
	if bytes.Equal(got, want) {
		return ""
	}
	if bytes.IndexByte(want, 0) >= 0 || bytes.IndexByte(got, 0) >= 0 {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		return fmt.Sprintf("binary, first different byte at offset %d (%d bytes, want %d)", i, len(got), len(want))
	}
	g, w := strings.SplitAfter(string(got), "\n"), strings.SplitAfter(string(want), "\n")
	for i := 0; ; i++ {
		switch {
		case i >= len(g):
			return fmt.Sprintf("line %d: the output ends; want %q", i+1, w[i])
		case i >= len(w):
			return fmt.Sprintf("line %d: the golden file ends; got %q", i+1, g[i])
		case g[i] != w[i]:
			return fmt.Sprintf("line %d:\n  got  %q\n  want %q", i+1, g[i], w[i])
		}
	}
}

// checkNoStaleScenarios: every directory of goldenDir is a public scenario's.
func checkNoStaleScenarios(t *testing.T, names []string) {
	entries, err := os.ReadDir(goldenDir)
	if err != nil {
		return // reported by the scenarios' checks
	}
	for _, e := range entries {
		if slices.Contains(names, e.Name()) {
			continue
		}
		if updating() {
			if err := os.RemoveAll(filepath.Join(goldenDir, e.Name())); err != nil {
				t.Error(err)
			}
			continue
		}
		t.Errorf("%s: no public scenario of that name (remove it with -update)", filepath.Join(goldenDir, e.Name()))
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
