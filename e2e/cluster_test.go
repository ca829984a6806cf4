package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
	"github.com/slicemeter/slicemeter/internal/chconn"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	"github.com/slicemeter/slicemeter/schemas/migrations"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestClusterDeployment is the scaled-out shape on ClickHouse: two shards sharing a ZooKeeper,
// `migrate --cluster`, a collector with --clickhouse.cluster writing through the Distributed
// tables of one node, and `report` reading through the other node. Every sample is stored
// once across the shards, the per-second rollups (recomputed by the collector from the
// Distributed raw table) are complete, and the report equals the scenario's expected one.
func TestClusterDeployment(t *testing.T) {
	t.Parallel()
	localtest.SkipShort(t, "ZooKeeper, two ClickHouse servers and Kafka")
	// A bound on a hung run, not a speed target: beside the other tests on a loaded machine the
	// cluster's start and `migrate --cluster` took more than 5 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const name = "slicemeter_e2e"
	// A broker of its own: the test recreates the fixed-name topics, which on the shared
	// broker would keep it from running beside the others.
	kfk := localtest.NewKafka(t)
	cluster := localtest.NewCluster(t, local.ClusterOptions{Name: name, Shards: 2, Profile: migrations.ClusterSettings})
	file := filepath.Join(scenarios, "mig-basic.yaml")
	sc := loadScenario(t, file)
	const db = "e2e_cluster"
	writeDSN, readDSN := cluster.Nodes[0].DSN(db), cluster.Nodes[1].DSN(db)

	apptest.Migrate(t, ctx, writeDSN, "--cluster", name)
	// The flag refuses a malformed cluster name before touching anything.
	if r := apptest.Run(t, ctx, "collector", "--kafka.brokers", kfk.Brokers(), "--clickhouse.dsn", writeDSN,
		"--clickhouse.cluster", "no-such cluster"); r.Code != 2 || !strings.Contains(r.Stderr, "--clickhouse.cluster") {
		t.Fatalf("collector with a bad cluster name: exit %d, want 2\n%s", r.Code, r.Stderr)
	}

	brokers := kafkaconn.ParseBrokers(kfk.Brokers())
	freshTopics(t, ctx, brokers, 4, pb.TopicSamples, pb.TopicAllocations, pb.TopicDeadLetter)
	events := announceAllocations(t, ctx, brokers, sc)
	collector := apptest.StartCollector(t, ctx, "--kafka.brokers", kfk.Brokers(), "--clickhouse.dsn", writeDSN,
		"--clickhouse.cluster", name, "--kafka.group", "e2e-cluster", "--collector.flush-interval", "200ms")

	apptest.MustRun(t, ctx, "exporter", "--source", "sim", "--scenario", file, "--sim.fast", "--no-sim.allocations", // announced above
		"--kafka.brokers", kfk.Brokers(), "--kafka.flush-interval", "5s", "--web.listen-address", "127.0.0.1:0")
	instances := 5 // four MIG instances and a whole GPU
	ticks := int(sc.Duration / sc.Interval)
	produced := uint64(instances * ticks)

	// Read through the other node.
	read := connect(t, ctx, readDSN)
	waitSamplesAndAllocations(t, ctx, read, produced, uint64(len(events)), 2*time.Minute, collector)
	if err := collector.Stop(); err != nil {
		t.Fatalf("collector did not stop cleanly: %v\n%s", err, collector.LogTail(30))
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

	r := apptest.Report(t, ctx, readDSN, scenarioWindow(file, sc)...)
	want := readCSV(t, filepath.Join(scenarios, "mig-basic.expected.csv"))
	if d := compareReports(parseCSV(t, r.Stdout), want, sc.Interval.Seconds()); len(d) > 0 {
		t.Errorf("report through the cluster differs:\n  %s", strings.Join(d, "\n  "))
	}
}
