package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/deploy/local"
	"github.com/slicemeter/slicemeter/internal/chconn"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	"github.com/slicemeter/slicemeter/schemas/migrations"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestClusterDeployment is the scaled-out shape on ClickHouse: two shards sharing a ZooKeeper,
// `migrate --cluster`, a collector with --clickhouse.cluster writing through the Distributed
// tables of one node, and `report` reading through the other node. Every sample is stored
// once across the shards, the per-second rollups (recomputed by the collector from the
// Distributed raw table) are complete, and the report equals the scenario's expected one.
func TestClusterDeployment(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ZooKeeper, two ClickHouse servers and Kafka")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const name = "slicemeter_e2e"
	var (
		wg      sync.WaitGroup
		cluster *local.Cluster
		kfk     *local.Kafka
		errs    [2]error
	)
	wg.Go(func() {
		cluster, errs[0] = local.StartCluster(ctx, local.ClusterOptions{Name: name, Shards: 2, Profile: migrations.ClusterSettings})
	})
	wg.Go(func() { kfk, errs[1] = local.StartKafka(ctx, local.KafkaOptions{}) })
	wg.Wait()
	if cluster != nil {
		defer cluster.Close()
	}
	if kfk != nil {
		defer kfk.Close()
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(scenarios, "mig-basic.yaml")
	sc, err := scenario.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	const db = "e2e_cluster"
	writeDSN, readDSN := cluster.Nodes[0].DSN(db), cluster.Nodes[1].DSN(db)

	if r := slicemeter(t, ctx, "migrate", "--clickhouse.dsn", writeDSN, "--cluster", name); r.code != 0 {
		t.Fatalf("migrate --cluster exited %d\n%s", r.code, r.stderr)
	}
	// The flag refuses a malformed cluster name before touching anything.
	if r := slicemeter(t, ctx, "collector", "--kafka.brokers", kfk.Brokers(), "--clickhouse.dsn", writeDSN,
		"--clickhouse.cluster", "no-such cluster"); r.code != 2 || !strings.Contains(r.stderr, "--clickhouse.cluster") {
		t.Fatalf("collector with a bad cluster name: exit %d, want 2\n%s", r.code, r.stderr)
	}

	brokers := kafkaconn.ParseBrokers(kfk.Brokers())
	if err := kafkaconn.EnsureTopics(ctx, brokers, 4, pb.TopicSamples, pb.TopicAllocations, pb.TopicDeadLetter); err != nil {
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

	logPath := filepath.Join(t.TempDir(), "collector.log")
	collector := exec.CommandContext(ctx, binary, "collector", "--kafka.brokers", kfk.Brokers(), "--clickhouse.dsn", writeDSN,
		"--clickhouse.cluster", name, "--web.listen-address", "127.0.0.1:0", "--collector.flush-interval", "200ms")
	startLogged(t, collector, logPath)
	defer stopProcess(collector)

	r := slicemeter(t, ctx, "exporter", "--source", "sim", "--scenario", file, "--sim.fast",
		"--kafka.brokers", kfk.Brokers(), "--kafka.flush-interval", "5s", "--web.listen-address", "127.0.0.1:0")
	if r.code != 0 {
		t.Fatalf("exporter exited %d\n%s", r.code, r.stderr)
	}
	instances := 5 // four MIG instances and a whole GPU
	ticks := int(sc.Duration / sc.Interval)
	produced := uint64(instances * ticks)

	read, err := chconn.Open(ctx, readDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer read.Close()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		samples := queryUint(t, ctx, read, "SELECT count() FROM (SELECT DISTINCT node, instance_id, ts_ns FROM samples)")
		allocs := queryUint(t, ctx, read, "SELECT uniqExact(allocation_id) FROM allocations")
		if samples == produced && allocs == uint64(len(events)) {
			break
		}
		if samples > produced || time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			t.Fatalf("stored %d of %d samples and %d of %d allocations (read through the other node)\n%s",
				samples, produced, allocs, len(events), tail(string(log), 30))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := collector.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := collector.Wait(); err != nil {
		log, _ := os.ReadFile(logPath)
		t.Fatalf("collector did not stop cleanly: %v\n%s", err, tail(string(log), 30))
	}

	// The rollups are complete: one row per instance and second, each with all its samples.
	seconds := queryUint(t, ctx, read, `SELECT count() FROM (SELECT node, instance_id, time, max(samples) AS n
        FROM samples_1s GROUP BY node, instance_id, time) WHERE n = 10`)
	if want := uint64(instances * int(sc.Duration/time.Second)); seconds != want {
		t.Errorf("samples_1s: %d complete seconds, want %d", seconds, want)
	}
	// Each sample lives on exactly one shard: the shards' own tables add up to what was produced.
	var onShards uint64
	for _, n := range cluster.Nodes {
		conn, err := chconn.Open(ctx, n.DSN(db))
		if err != nil {
			t.Fatal(err)
		}
		onShards += queryUint(t, ctx, conn, "SELECT count() FROM (SELECT DISTINCT node, instance_id, ts_ns FROM samples"+migrations.LocalSuffix+")")
		conn.Close()
	}
	if onShards != produced {
		t.Errorf("the shards hold %d samples between them, want %d", onShards, produced)
	}

	r = slicemeter(t, ctx, "report", "--clickhouse.dsn", readDSN, "--scenario", file,
		"--from", sc.Start.Format(time.RFC3339), "--to", sc.End().Format(time.RFC3339))
	if r.code != 0 {
		t.Fatalf("report exited %d\n%s", r.code, r.stderr)
	}
	got := filepath.Join(t.TempDir(), "report.csv")
	if err := os.WriteFile(got, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	want := readCSV(t, filepath.Join(scenarios, "mig-basic.expected.csv"))
	if d := compareReports(readCSV(t, got), want, sc.Interval.Seconds()); len(d) > 0 {
		t.Errorf("report through the cluster differs:\n  %s", strings.Join(d, "\n  "))
	}
}
