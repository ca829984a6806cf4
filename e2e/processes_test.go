package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/deploy/local"
	"github.com/slicemeter/slicemeter/internal/chconn"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// The deployed shape: migrate, then a long-running collector and an exporter as separate
// processes, allocations announced by the scheduler (this test), and report reading ClickHouse.
func TestSeparateProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real ClickHouse and Kafka")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ch, err := local.StartClickHouse(ctx, local.ClickHouseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	kfk, err := local.StartKafka(ctx, local.KafkaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer kfk.Close()
	file := filepath.Join(scenarios, "outage-coldstart.yaml")
	sc, err := scenario.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	dsn := ch.DSN("e2e_processes")

	if r := slicemeter(t, ctx, "migrate", "--clickhouse.dsn", dsn); r.code != 0 {
		t.Fatalf("migrate exited %d\n%s", r.code, r.stderr)
	}
	// Idempotent: a second run applies nothing.
	if r := slicemeter(t, ctx, "migrate", "--clickhouse.dsn", dsn); r.code != 0 || !strings.Contains(r.stderr, "applied_now=[]") {
		t.Fatalf("second migrate exited %d\n%s", r.code, r.stderr)
	}

	collectorLog, err := os.Create(filepath.Join(t.TempDir(), "collector.log"))
	if err != nil {
		t.Fatal(err)
	}
	collector := exec.CommandContext(ctx, binary, "collector", "--kafka.brokers", kfk.Brokers(), "--clickhouse.dsn", dsn,
		"--web.listen-address", "127.0.0.1:0", "--collector.flush-interval", "200ms")
	collector.Stdout, collector.Stderr = collectorLog, collectorLog
	if err := collector.Start(); err != nil {
		t.Fatal(err)
	}
	defer collector.Process.Kill()

	// The scheduler's announcements.
	brokers := kafkaconn.ParseBrokers(kfk.Brokers())
	if err := kafkaconn.EnsureTopics(ctx, brokers, 2, pb.TopicAllocations); err != nil {
		t.Fatal(err)
	}
	w := kafkaconn.NewWriter(brokers, pb.TopicAllocations, nil)
	events := sc.AllocationEvents()
	for _, e := range events {
		v, err := proto.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteMessages(ctx, kafka.Message{Key: []byte(e.Tenant), Value: v}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()

	r := slicemeter(t, ctx, "exporter", "--source", "sim", "--scenario", file, "--sim.fast",
		"--kafka.brokers", kfk.Brokers(), "--kafka.flush-interval", "5s", "--web.listen-address", "127.0.0.1:0")
	if r.code != 0 {
		t.Fatalf("exporter exited %d\n%s", r.code, r.stderr)
	}
	produced := uint64(3 * (36000 - 1200)) // three instances, minus the 2-minute outage

	conn, err := chconn.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var samples, allocs uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM (SELECT DISTINCT node, instance_id, ts_ns FROM samples)").Scan(&samples); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, "SELECT uniqExact(allocation_id) FROM allocations").Scan(&allocs); err != nil {
			t.Fatal(err)
		}
		if samples == produced && allocs == uint64(len(events)) {
			break
		}
		if samples > produced || time.Now().After(deadline) {
			log, _ := os.ReadFile(collectorLog.Name())
			t.Fatalf("stored %d of %d samples and %d of %d allocations\n%s", samples, produced, allocs, len(events), log)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A clean stop: SIGTERM, final flush, exit 0.
	if err := collector.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := collector.Wait(); err != nil {
		log, _ := os.ReadFile(collectorLog.Name())
		t.Errorf("collector did not stop cleanly: %v\n%s", err, log)
	}

	r = slicemeter(t, ctx, "report", "--clickhouse.dsn", dsn, "--scenario", file,
		"--from", sc.Start.Format(time.RFC3339), "--to", sc.End().Format(time.RFC3339))
	if r.code != 0 {
		t.Fatalf("report exited %d\n%s", r.code, r.stderr)
	}
	got := filepath.Join(t.TempDir(), "report.csv")
	if err := os.WriteFile(got, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	want := readCSV(t, filepath.Join(scenarios, "outage-coldstart.expected.csv"))
	if d := compareReports(readCSV(t, got), want, sc.Interval.Seconds()); len(d) > 0 {
		t.Errorf("report differs:\n  %s", strings.Join(d, "\n  "))
	}
	// JSON carries the same rows.
	r = slicemeter(t, ctx, "report", "--clickhouse.dsn", dsn, "--scenario", file, "--format", "json",
		"--from", sc.Start.Format(time.RFC3339), "--to", sc.End().Format(time.RFC3339))
	if r.code != 0 || !strings.Contains(r.stdout, `"tenant": "slowco"`) && !strings.Contains(r.stdout, `"tenant":"slowco"`) {
		t.Errorf("json report: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
