package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/segmentio/kafka-go"

	"github.com/slicemeter/slicemeter/attribution/allocations"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
	"github.com/slicemeter/slicemeter/exporter/sim"
	"github.com/slicemeter/slicemeter/internal/chconn"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// The deployed shape, for every public scenario: migrate, then a long-running collector and an
// exporter as separate processes, allocations announced by the scheduler (this test), and
// report reading ClickHouse, compared with the scenario's expected report; then the
// attribution service as a process of its own over the same data, whose stored minutes
// (report --from-minutes) give the expected report too. The scenario is moved to have ended a
// minute ago (--sim.start), so that the service's backfill reaches it, and the expected
// report's window with it. The scenarios share one broker (the test's own: it recreates the
// fixed-name topics, which on the shared broker would keep it from running beside the other
// tests) and one ClickHouse, one after the other: each has its own database, topics created
// afresh and a consumer group of its own.
func TestSeparateProcesses(t *testing.T) {
	t.Parallel()
	ch, kfk := localtest.ClickHouse(t), localtest.NewKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	brokers := kafkaconn.ParseBrokers(kfk.Brokers())
	for _, file := range scenarioFiles(t) {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			sc := loadScenario(t, file)
			want := readCSV(t, expectedCSV(file))
			start := time.Now().UTC().Truncate(time.Minute).Add(-sc.Duration - time.Minute)
			moveExpected(want, sc.Start, sc.End(), start, start.Add(sc.Duration))
			sc.Start = start // the allocations announced, the samples counted and the window reported
			dsn := localtest.Database(t, localtest.DatabaseOptions{Server: ch, Unmigrated: true}).DSN
			apptest.Migrate(t, ctx, dsn)
			// Idempotent: a second run applies nothing.
			if r := apptest.Run(t, ctx, "migrate", "--clickhouse.dsn", dsn); r.Code != 0 || !strings.Contains(r.Stderr, "applied_now=[]") {
				t.Fatalf("second migrate exited %d\n%s", r.Code, r.Stderr)
			}
			freshTopics(t, ctx, brokers, 4, pb.TopicSamples, pb.TopicAllocations, pb.TopicDeadLetter)
			collector := apptest.StartCollector(t, ctx, "--kafka.brokers", kfk.Brokers(), "--clickhouse.dsn", dsn,
				"--kafka.group", "e2e-"+name, "--collector.flush-interval", "200ms")
			events := announceAllocations(t, ctx, brokers, sc)

			// The test announces the allocations itself (announceAllocations): no simulated scheduler.
			apptest.MustRun(t, ctx, "exporter", "--source", "sim", "--scenario", file, "--sim.fast", "--sim.start", start.Format(time.RFC3339),
				"--no-sim.allocations", "--kafka.brokers", kfk.Brokers(), "--kafka.flush-interval", "5s", "--web.listen-address", "127.0.0.1:0")
			conn := connect(t, ctx, dsn)
			waitSamplesAndAllocations(t, ctx, conn, simulatedCount(t, sc), uint64(len(events)), 3*time.Minute, collector)
			// A clean stop: SIGTERM, final flush, exit 0.
			if err := collector.Stop(); err != nil {
				t.Errorf("collector did not stop cleanly: %v\n%s", err, collector.Log())
			}

			r := apptest.Report(t, ctx, dsn, scenarioWindow(file, sc)...)
			if d := compareReports(parseCSV(t, r.Stdout), want, sc.Interval.Seconds()); len(d) > 0 {
				t.Errorf("report differs from %s.expected.csv:\n  %s", name, strings.Join(d, "\n  "))
			}
			// JSON carries the same rows.
			tenant := sc.Tenants[0].Name
			r = apptest.Run(t, ctx, append([]string{"report", "--clickhouse.dsn", dsn, "--format", "json"}, scenarioWindow(file, sc)...)...)
			if r.Code != 0 || !strings.Contains(r.Stdout, `"tenant": "`+tenant+`"`) && !strings.Contains(r.Stdout, `"tenant":"`+tenant+`"`) {
				t.Errorf("json report: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
			}

			// The attribution service, over the same data: its stored minutes make the report.
			svc := apptest.StartAttribution(t, ctx, "--api.insecure-no-auth", "--clickhouse.dsn", dsn, "--scenario", file,
				"--attribution.interval", "1s", "--attribution.delay", "0s", "--attribution.backfill", (sc.Duration + 15*time.Minute).String())
			waitMinutes(t, ctx, conn, sc.Start, sc.End(), 3*time.Minute, svc)
			// Stopped: its last pass, and the hours rolled up from it, are stored.
			if err := svc.Stop(); err != nil {
				t.Errorf("attribution service did not stop cleanly: %v\n%s", err, svc.LogTail(30))
			}
			r = apptest.Report(t, ctx, dsn, append(scenarioWindow(file, sc), "--from-minutes")...)
			if d := compareReports(parseCSV(t, r.Stdout), want, sc.Interval.Seconds()); len(d) > 0 {
				t.Errorf("report --from-minutes of the attribution service's minutes differs from %s.expected.csv:\n  %s", name, strings.Join(d, "\n  "))
			}
		})
	}
}

// freshTopics deletes topics, if they exist, and creates them again, empty: a scenario on a
// shared broker sees only its own messages.
func freshTopics(t *testing.T, ctx context.Context, brokers []string, partitions int, topics ...string) {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	if _, err := client.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: topics}); err != nil {
		t.Fatalf("deleting topics %v: %v", topics, err)
	}
	// Deletion completes asynchronously; creating a topic still being deleted fails.
	deadline := time.Now().Add(30 * time.Second)
	for {
		meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
		gone := err == nil
		for _, tp := range meta.Topics {
			gone = gone && tp.Error != nil
		}
		if gone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("topics %v still there 30 s after their deletion (%v)", topics, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := (kafkaconn.Cluster{Brokers: brokers}).EnsureTopics(ctx, partitions, topics...); err != nil {
		t.Fatalf("creating topics %v: %v", topics, err)
	}
}

// announceAllocations sends the scenario's allocation events to the allocations topic, keyed
// by tenant, as a scheduler does, and returns them.
func announceAllocations(t *testing.T, ctx context.Context, brokers []string, sc *scenario.Scenario) []*pb.AllocationEvent {
	t.Helper()
	events := sc.AllocationEvents()
	if err := allocations.Announce(ctx, kafkaconn.Cluster{Brokers: brokers}, events, nil); err != nil {
		t.Fatal(err)
	}
	return events
}

// simulatedCount is how many samples the simulator produces for the scenario.
func simulatedCount(t *testing.T, sc *scenario.Scenario) uint64 {
	t.Helper()
	src, err := sim.New(sc, "", sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for d := time.Duration(0); d < sc.Duration; d += sc.Interval {
		nodes, err := src.Read(context.Background(), sc.Start.Add(d), sc.Interval)
		if err != nil {
			t.Fatal(err)
		}
		for _, node := range nodes {
			n += uint64(len(node.Samples))
		}
	}
	return n
}

// connect opens dsn for the test's queries; it is closed when the test ends.
func connect(t *testing.T, ctx context.Context, dsn string) driver.Conn {
	t.Helper()
	conn, err := chconn.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// waitSamplesAndAllocations waits until exactly samples distinct samples and allocations
// distinct allocations are stored; more samples, or not within limit, fails the test with the
// collector's log.
func waitSamplesAndAllocations(t *testing.T, ctx context.Context, conn driver.Conn, samples, allocations uint64, limit time.Duration, collector *apptest.Process) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		s := queryUint(t, ctx, conn, "SELECT count() FROM (SELECT DISTINCT node, instance_id, ts_ns FROM samples)")
		a := queryUint(t, ctx, conn, "SELECT uniqExact(allocation_id) FROM allocations")
		if s == samples && a == allocations {
			return
		}
		if s > samples || time.Now().After(deadline) {
			t.Fatalf("stored %d of %d samples and %d of %d allocations\n%s", s, samples, a, allocations, collector.LogTail(30))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// moveExpected moves the window of an expected report's rows from [from, to) to [start, end),
// as --sim.start moves the scenario.
func moveExpected(rows [][]string, from, to, start, end time.Time) {
	moved := map[string]string{from.Format(time.RFC3339): start.Format(time.RFC3339), to.Format(time.RFC3339): end.Format(time.RFC3339)}
	for j, col := range rows[0] {
		if col != "window_start" && col != "window_end" {
			continue
		}
		for _, row := range rows[1:] {
			if m, ok := moved[row[j]]; ok {
				row[j] = m
			}
		}
	}
}

// waitMinutes waits until the attribution service has stored every minute of [from, to);
// not within limit, it fails the test with the service's log.
func waitMinutes(t *testing.T, ctx context.Context, conn driver.Conn, from, to time.Time, limit time.Duration, svc *apptest.Process) {
	t.Helper()
	want := uint64(to.Sub(from) / time.Minute)
	deadline := time.Now().Add(limit)
	for {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT uniqExact(minute) FROM "+tables.AttributionMinutes+" WHERE minute >= toDateTime(?) AND minute < toDateTime(?)",
			from.Unix(), to.Unix()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the attribution service stored %d of the %d minutes of [%s, %s)\n%s", n, want, from.Format(time.RFC3339), to.Format(time.RFC3339), svc.LogTail(30))
		}
		time.Sleep(500 * time.Millisecond)
	}
}
