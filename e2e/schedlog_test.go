package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
)

// A vGPU scheduler log that fills faster than a tick (two always-busy vGPUs, 1 ms slices,
// sampled every 250 ms) is read between the ticks on the simulator's fast clock: `demo --fast`
// and `report` from every table give the expected report (efficiency 1, no waste), not the
// 0.824 and the waste that a log read once a tick (or every 200 ms of wall time) gave.
func TestVGPUSchedulerLogOnTheSourcesClock(t *testing.T) {
	t.Parallel()
	ch := localtest.ClickHouse(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	file := filepath.Join("..", "exporter", "testdata", "vgpu-longtick.yaml")
	sc := loadScenario(t, file)
	want := readCSV(t, expectedCSV(file))
	kafka := localtest.NewKafka(t)
	dsn := localtest.Database(t, localtest.DatabaseOptions{Server: ch, Unmigrated: true}).DSN
	out := filepath.Join(t.TempDir(), "report.csv")
	apptest.Demo(t, ctx, "--scenario", file, "--fast", "--report", out,
		"--kafka.brokers", kafka.Brokers(), "--clickhouse.dsn", dsn, "--web.listen-address", "127.0.0.1:0")
	if d := compareReports(readCSV(t, out), want, sc.Interval.Seconds()); len(d) > 0 {
		t.Errorf("demo --fast report differs from %s:\n  %s", expectedCSV(file), strings.Join(d, "\n  "))
	}
	for _, samples := range []string{"raw", "rollup-1s", "rollup-1m"} {
		r := apptest.Report(t, ctx, dsn, append(scenarioWindow(file, sc), "--attribution.samples", samples)...)
		if d := compareReports(parseCSV(t, r.Stdout), want, sc.Interval.Seconds()); len(d) > 0 {
			t.Errorf("report --attribution.samples %s differs from %s:\n  %s", samples, expectedCSV(file), strings.Join(d, "\n  "))
		}
	}
}
