// Package e2e runs the real slicemeter binary as processes against a real ClickHouse server
// and a real Apache Kafka broker, and compares its reports with the public scenarios' expected
// reports.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local"
	"github.com/slicemeter/slicemeter/schemas/scenario"
)

const scenarios = "../schemas/scenario/testdata"

var binary string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "slicemeter-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "slicemeter")
	build := exec.Command("go", "build", "-o", binary, "../cmd/slicemeter")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building slicemeter:", err)
		return 1
	}
	return m.Run()
}

// result is one run of the binary.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

func slicemeter(t testing.TB, ctx context.Context, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(ctx, binary, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "SLICEMETER_LOG_LEVEL=info")
	began := time.Now()
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(began)}
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		} else {
			t.Fatalf("running slicemeter %v: %v", args, err)
		}
	}
	return r
}

func TestPublicScenariosRealServices(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real ClickHouse and Kafka")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	ch, err := local.StartClickHouse(ctx, local.ClickHouseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()

	files, err := filepath.Glob(filepath.Join(scenarios, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios in %s: %v", scenarios, err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			sc, err := scenario.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			// A broker per scenario: each run's topics hold only its own fleet.
			kafka, err := local.StartKafka(ctx, local.KafkaOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer kafka.Close()
			dsn := ch.DSN("e2e_" + strings.ReplaceAll(name, "-", "_"))
			want := readCSV(t, strings.TrimSuffix(file, ".yaml")+".expected.csv")
			out := filepath.Join(t.TempDir(), "report.csv")

			r := slicemeter(t, ctx, "demo", "--scenario", file, "--fast", "--report", out,
				"--kafka.brokers", kafka.Brokers(), "--clickhouse.dsn", dsn, "--web.listen-address", "127.0.0.1:0")
			if r.code != 0 {
				t.Fatalf("demo exited %d\n%s", r.code, r.stderr)
			}
			t.Logf("demo on %s with real Kafka and ClickHouse: %v\n%s", name, r.took.Round(time.Millisecond), lastLine(r.stderr))
			if d := compareReports(readCSV(t, out), want, sc.Interval.Seconds()); len(d) > 0 {
				t.Errorf("demo report differs from %s.expected.csv:\n  %s", name, strings.Join(d, "\n  "))
			}

			// The report command recomputes it from ClickHouse alone.
			r = slicemeter(t, ctx, "report", "--clickhouse.dsn", dsn, "--scenario", file,
				"--from", sc.Start.Format(time.RFC3339), "--to", sc.End().Format(time.RFC3339))
			if r.code != 0 {
				t.Fatalf("report exited %d\n%s", r.code, r.stderr)
			}
			report := filepath.Join(t.TempDir(), "report2.csv")
			if err := os.WriteFile(report, []byte(r.stdout), 0o644); err != nil {
				t.Fatal(err)
			}
			if d := compareReports(readCSV(t, report), want, sc.Interval.Seconds()); len(d) > 0 {
				t.Errorf("report differs from %s.expected.csv:\n  %s", name, strings.Join(d, "\n  "))
			}
		})
	}
}

// The demo's own defaults: embedded Kafka (kfake) and a ClickHouse server it starts itself.
func TestDemoDefaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ClickHouse")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	file := filepath.Join(scenarios, "vgpu-timeslice.yaml")
	sc, err := scenario.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	r := slicemeter(t, ctx, "demo", "--scenario", file, "--fast", "--web.listen-address", "127.0.0.1:0")
	if r.code != 0 {
		t.Fatalf("demo exited %d\n%s", r.code, r.stderr)
	}
	got := filepath.Join(t.TempDir(), "report.csv")
	if err := os.WriteFile(got, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	want := readCSV(t, filepath.Join(scenarios, "vgpu-timeslice.expected.csv"))
	if d := compareReports(readCSV(t, got), want, sc.Interval.Seconds()); len(d) > 0 {
		t.Errorf("report differs:\n  %s", strings.Join(d, "\n  "))
	}
	t.Logf("demo with embedded Kafka and its own ClickHouse: %v\n%s", r.took.Round(time.Millisecond), lastLine(r.stderr))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
