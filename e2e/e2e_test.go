// Package e2e runs the real slicemeter binary as processes against a real ClickHouse server
// and a real Apache Kafka broker, and compares its reports with the public scenarios' expected
// reports.
package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
	"github.com/slicemeter/slicemeter/schemas/scenario"
)

const scenarios = "../schemas/scenario/testdata"

// TestMain stops the shared ClickHouse and Kafka and removes the binary built for the tests.
func TestMain(m *testing.M) { apptest.Main(m) }

func TestPublicScenariosRealServices(t *testing.T) {
	t.Parallel()
	ch := localtest.ClickHouse(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	t.Cleanup(cancel) // after the parallel subtests, which run once this function has returned
	for _, file := range scenarioFiles(t) {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sc := loadScenario(t, file)
			// A broker per scenario: each run's topics hold only its own fleet.
			kafka := localtest.NewKafka(t)
			dsn := localtest.Database(t, localtest.DatabaseOptions{Server: ch, Unmigrated: true}).DSN
			want := readCSV(t, expectedCSV(file))
			out := filepath.Join(t.TempDir(), "report.csv")

			r := apptest.Demo(t, ctx, "--scenario", file, "--fast", "--report", out,
				"--kafka.brokers", kafka.Brokers(), "--clickhouse.dsn", dsn, "--web.listen-address", "127.0.0.1:0")
			t.Logf("demo on %s with real Kafka and ClickHouse: %v\n%s", name, r.Took.Round(time.Millisecond), lastLine(r.Stderr))
			if d := compareReports(readCSV(t, out), want, sc.Interval.Seconds()); len(d) > 0 {
				t.Errorf("demo report differs from %s.expected.csv:\n  %s", name, strings.Join(d, "\n  "))
			}

			// The report command recomputes it from ClickHouse alone.
			r = apptest.Report(t, ctx, dsn, scenarioWindow(file, sc)...)
			if d := compareReports(parseCSV(t, r.Stdout), want, sc.Interval.Seconds()); len(d) > 0 {
				t.Errorf("report differs from %s.expected.csv:\n  %s", name, strings.Join(d, "\n  "))
			}
		})
	}
}

// The demo's own defaults: embedded Kafka (kfake) and a ClickHouse server it starts itself.
func TestDemoDefaults(t *testing.T) {
	t.Parallel()
	localtest.SkipShort(t, "ClickHouse (the demo starts its own)")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	file := filepath.Join(scenarios, "vgpu-timeslice.yaml")
	sc := loadScenario(t, file)
	r := apptest.Demo(t, ctx, "--scenario", file, "--fast", "--web.listen-address", "127.0.0.1:0")
	want := readCSV(t, filepath.Join(scenarios, "vgpu-timeslice.expected.csv"))
	if d := compareReports(parseCSV(t, r.Stdout), want, sc.Interval.Seconds()); len(d) > 0 {
		t.Errorf("report differs:\n  %s", strings.Join(d, "\n  "))
	}
	t.Logf("demo with embedded Kafka and its own ClickHouse: %v\n%s", r.Took.Round(time.Millisecond), lastLine(r.Stderr))
}

// scenarioFiles are the public scenarios.
func scenarioFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(scenarios, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios in %s: %v", scenarios, err)
	}
	return files
}

func loadScenario(t *testing.T, file string) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// expectedCSV is the expected report of a scenario file.
func expectedCSV(file string) string { return strings.TrimSuffix(file, ".yaml") + ".expected.csv" }

// scenarioWindow are report's arguments for the scenario's price book and whole time range.
func scenarioWindow(file string, sc *scenario.Scenario) []string {
	return []string{"--scenario", file, "--from", sc.Start.Format(time.RFC3339), "--to", sc.End().Format(time.RFC3339)}
}

// writeFile writes content to name in t's directory and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
