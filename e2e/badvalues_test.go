package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/collector"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// TestBadValuesNeverStopTheBill publishes, beside a minute of valid samples and allocations,
// samples with NaN, out-of-range and absurd values, and allocations for a reserved and a
// formula tenant and at a tier the price book lacks, through a real broker to the real collector
// binary started with that price book. The bad ones are dead-lettered with reason invalid and
// their field, and the report over the window still bills the valid tenants, exactly as without
// them, from raw samples, both rollups and the minutes the attribution service stored.
func TestBadValuesNeverStopTheBill(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	kfk := localtest.NewKafka(t) // of its own: the test reads the whole dead-letter topic
	db := localtest.Database(t, localtest.DatabaseOptions{Name: "e2e_badvalues", Unmigrated: true})
	apptest.Migrate(t, ctx, db.DSN)
	brokers := kafkaconn.ParseBrokers(kfk.Brokers())
	if err := (kafkaconn.Cluster{Brokers: brokers}).EnsureTopics(ctx, 1, pb.TopicSamples, pb.TopicAllocations, pb.TopicDeadLetter); err != nil {
		t.Fatal(err)
	}
	col := apptest.StartCollector(t, ctx, "--kafka.brokers", kfk.Brokers(), "--clickhouse.dsn", db.DSN,
		"--collector.flush-interval", "200ms", "--kafka.partitions", "1", "--pricebook", faultPriceBook)

	const seconds = 60
	// A minute that ended a few minutes ago, so that the attribution service's backfill reaches it.
	from := time.Now().UTC().Truncate(time.Minute).Add(-5 * time.Minute)
	base := uint64(from.UnixNano())
	sample := func(gpu int, k int) *pb.Sample {
		return &pb.Sample{TsNs: base + uint64(k)*1e9, IntervalNs: 1e9, Model: "H100-SXM5-80GB", Kind: pb.Kind_KIND_GPU,
			GpuUuid: []string{"GPU-0", "GPU-1"}[gpu], GpuIndex: uint32(gpu), InstanceId: []string{"gpu0", "gpu1"}[gpu],
			Attached: true, SmActive: 0.5, MemUsedBytes: 1 << 30, MemTotalBytes: 80 << 30, PowerWatts: 300,
			SmCount: faultGPUSMs, GpuSmCount: faultGPUSMs, GpuMemTotalBytes: 80 << 30}
	}
	var msgs []kafka.Message
	add := func(topic string, m proto.Message, key string) {
		v, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, kafka.Message{Topic: topic, Key: []byte(key), Value: v})
	}
	for k := range seconds {
		add(pb.TopicSamples, &pb.SampleBatch{Node: "node-a", Seq: uint64(k), Samples: []*pb.Sample{sample(0, k), sample(1, k)}}, "node-a")
	}
	// A later batch repeats keys of valid samples with bad values: stored, they would replace
	// the valid ones (the last received wins) and poison the bill.
	bad := func(k int, mutate func(*pb.Sample)) *pb.Sample { s := sample(0, k); mutate(s); return s }
	badSamples := []*pb.Sample{
		sample(1, 0), // valid: stored again, a duplicate
		bad(1, func(s *pb.Sample) { s.SmActive = math.NaN() }),
		bad(2, func(s *pb.Sample) { s.SmActive = 5 }),
		bad(3, func(s *pb.Sample) { s.SmActive = -3 }),
		bad(4, func(s *pb.Sample) { s.IntervalNs = uint64(10 * 365 * 24 * time.Hour) }),
		bad(5, func(s *pb.Sample) { s.MemUsedBytes = s.MemTotalBytes + 1 }),
		bad(6, func(s *pb.Sample) { s.PowerWatts = math.Inf(1) }),
		bad(7, func(s *pb.Sample) { s.TsNs = uint64(time.Now().Add(time.Hour).UnixNano()) }),
	}
	for _, s := range badSamples[1:] {
		add(pb.TopicSamples, &pb.SampleBatch{Node: "node-a", Seq: 1000, Samples: []*pb.Sample{badSamples[0], s}}, "node-a")
	}
	for i, tn := range []struct{ id, tenant, tier, instance string }{
		{"good-a", "good-a", "pro", "gpu0"},
		{"good-b", "good-b", "budget", "gpu1"},
		{"reserved", "__unallocated__", "pro", "gpu1"},
		{"formula", `=HYPERLINK("http://evil","x")`, "pro", "gpu0"},
		{"unpriced", "good-c", "gold", "gpu2"}, // the collector's price book lacks gold
	} {
		add(pb.TopicAllocations, &pb.AllocationEvent{AllocationId: tn.id, Tenant: tn.tenant, Tier: tn.tier, Node: "node-a",
			InstanceId: tn.instance, RequestedAtNs: int64(base), StartedAtNs: int64(base), EndedAtNs: int64(base) + seconds*1e9,
			Version: uint64(i + 1)}, tn.tenant)
	}
	w := kafkaconn.Cluster{Brokers: brokers}.NewWriter("", nil)
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	w.Close()

	wantDead := len(badSamples) - 1 + 3
	var dead []kafka.Message
	waitUntil := time.Now().Add(60 * time.Second)
	for len(dead) < wantDead {
		if time.Now().After(waitUntil) {
			t.Fatalf("%d dead letters, want %d\n%s", len(dead), wantDead, col.LogTail(40))
		}
		time.Sleep(200 * time.Millisecond)
		dead = readTopic(t, ctx, brokers, pb.TopicDeadLetter, 1)
	}
	fields := map[string]int{}
	for _, m := range dead {
		if r := headerValue(m, collector.HeaderReason); r != "invalid" {
			t.Errorf("dead letter with reason %q (%s), want invalid", r, headerValue(m, collector.HeaderReasonDetail))
		}
		fields[headerValue(m, collector.HeaderField)]++
	}
	for field, n := range map[string]int{"sm_active": 3, "interval_ns": 1, "mem_used_bytes": 1, "power_watts": 1, "ts_ns": 1, "tenant": 2, "tier": 1} {
		if fields[field] != n {
			t.Errorf("%d dead letters for field %s, want %d (all: %v)", fields[field], field, n, fields)
		}
	}
	if n := queryUint(t, ctx, db.Conn, "SELECT count() FROM (SELECT instance_id, ts_ns FROM samples GROUP BY instance_id, ts_ns)"); n != 2*seconds {
		t.Errorf("%d distinct samples stored, want %d", n, 2*seconds)
	}
	if n := queryUint(t, ctx, db.Conn, "SELECT count() FROM samples WHERE NOT (sm_active >= 0 AND sm_active <= 1)"); n != 0 {
		t.Errorf("%d samples with sm_active outside [0, 1] stored", n)
	}

	// An import with a tier the price book lacks is refused whole: exit 2 naming line, field
	// and value, nothing stored.
	file := filepath.Join(t.TempDir(), "gold.csv")
	if err := os.WriteFile(file, []byte("allocation_id,tenant,tier,node,instance_id,requested_at,started_at,ended_at\n"+
		"imp-1,good-c,pro,node-a,gpu2,2026-01-05T00:00:00Z,2026-01-05T00:00:00Z,\n"+
		"imp-2,good-c,gold,node-a,gpu3,2026-01-05T00:00:00Z,2026-01-05T00:00:00Z,\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := apptest.Run(t, ctx, "allocations", "import", "--clickhouse.dsn", db.DSN, "--pricebook", faultPriceBook, file)
	if r.Code != 2 || !strings.Contains(r.Stderr, `gold.csv:3: tier: "gold"`) {
		t.Errorf("import with an unknown tier exited %d, want 2 naming gold.csv:3, tier and \"gold\":\n%s", r.Code, r.Stderr)
	}
	if n := queryUint(t, ctx, db.Conn, "SELECT count() FROM allocations"); n != 2 {
		t.Errorf("%d allocations stored, want the 2 valid ones", n)
	}

	// The attribution service stores the minute's attribution from the same samples.
	svc := apptest.StartAttribution(t, ctx, "--api.insecure-no-auth", "--clickhouse.dsn", db.DSN, "--pricebook", faultPriceBook,
		"--attribution.interval", "1s", "--attribution.delay", "0s", "--attribution.backfill", "15m", "--attribution.max-minutes", "30")
	for waitUntil := time.Now().Add(2 * time.Minute); queryUint(t, ctx, db.Conn, fmt.Sprintf(
		"SELECT count() FROM %s WHERE minute = toDateTime(%d)", tables.AttributionMinutes, from.Unix())) == 0; time.Sleep(500 * time.Millisecond) {
		if time.Now().After(waitUntil) {
			t.Fatalf("the attribution service stored no row of the minute within 2 minutes\n%s", svc.LogTail(20))
		}
	}
	if err := svc.Stop(); err != nil { // its pass done: the minute's rows are one insert
		t.Fatalf("stop the attribution service: %v\n%s", err, svc.LogTail(20))
	}

	window, to := from.Format(time.RFC3339), from.Add(time.Minute).Format(time.RFC3339)
	for _, source := range [][]string{{"--attribution.samples", "raw"}, {"--attribution.samples", "rollup-1s"}, {"--attribution.samples", "rollup-1m"}, {"--from-minutes"}} {
		report := apptest.Report(t, ctx, db.DSN, append([]string{"--pricebook", faultPriceBook, "--from", window, "--to", to}, source...)...).Stdout
		// 60 s of one H100 at 2.40/h: list 0.04, cost 0.04 at pro (1.0) and 0.028 at budget
		// (0.7); half busy: efficiency 0.5, as the valid samples say, whatever the bad ones said.
		for _, want := range []string{
			"\ngood-a,pro," + window + "," + to + ",60.000,0.040000,0.040000,0.020000,0.000000,0.5000,0.000,0.000,0,0.000,USD\n",
			"\ngood-b,budget," + window + "," + to + ",60.000,0.040000,0.028000,0.014000,0.000000,0.5000,0.000,0.000,0,0.000,USD\n",
		} {
			if !strings.Contains(report, want) {
				t.Errorf("report from %s lacks %q:\n%s", source, want, report)
			}
		}
		if strings.Count(report, "\n") != 4 || strings.Contains(report, "NaN") || strings.Contains(report, "HYPERLINK") {
			t.Errorf("report from %s: want the header, the two valid tenants and __unallocated__:\n%s", source, report)
		}
	}
}
