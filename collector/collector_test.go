package collector

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

func TestMain(m *testing.M) { localtest.Main(m) }

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// startCollector runs a collector until the test ends and returns it with its registry.
func startCollector(t *testing.T, cfg Config, conn driver.Conn) (*Collector, *prometheus.Registry, func() error) {
	t.Helper()
	reg := prometheus.NewRegistry()
	c, err := New(cfg, conn, reg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return fmt.Errorf("Run did not return 30 s after cancel")
		}
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return c, reg, stop
}

func produce(t testing.TB, brokers []string, msgs ...kafka.Message) {
	t.Helper()
	w := kafkaconn.Cluster{Brokers: brokers}.NewWriter("", nil)
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func sampleMessage(t testing.TB, batch *pb.SampleBatch) kafka.Message {
	value, err := proto.Marshal(batch)
	if err != nil {
		t.Fatal(err)
	}
	return kafka.Message{Topic: pb.TopicSamples, Key: []byte(batch.GetNode()), Value: value}
}

func allocationMessage(t testing.TB, event *pb.AllocationEvent) kafka.Message {
	value, err := proto.Marshal(event)
	if err != nil {
		t.Fatal(err)
	}
	return kafka.Message{Topic: pb.TopicAllocations, Key: []byte(event.GetTenant()), Value: value}
}

// base is 2026-01-05T00:00:00Z plus 700 ms, to see the truncation of column time.
const base = uint64(1_767_571_200_700_000_000)

// allocT0 is 2026-01-05T00:00:00Z: allocation times before 2000 are refused.
const allocT0 = int64(1_767_571_200_000_000_000)

// allocAt is allocT0 + ns, 0 left 0 (not set, still running).
func allocAt(ns int64) int64 {
	if ns == 0 {
		return 0
	}
	return allocT0 + ns
}

func sample(kind pb.Kind, id string, ts uint64) *pb.Sample {
	s := &pb.Sample{
		TsNs: ts, IntervalNs: 100_000_000, GpuUuid: "GPU-1", GpuIndex: 0, Model: "H100-SXM5-80GB",
		Kind: kind, InstanceId: id, Attached: true, SmActive: 0.5,
		MemUsedBytes: 1 << 30, MemTotalBytes: 20 << 30, PowerWatts: 300, SmCount: 132, GpuSmCount: 132,
		GpuMemTotalBytes: 80 << 30,
	}
	if kind == pb.Kind_KIND_VGPU {
		s.Vgpu = &pb.VgpuSchedule{RunNs: 50_000_000, SwitchNs: 20_000, WaitsNs: []uint64{6_000_000, 6_020_000}}
	}
	if kind == pb.Kind_KIND_MIG {
		s.Profile, s.ComputeSlices = "7g.80gb", 7 // all 132 SMs of the H100
	}
	return s
}

// committedOffset returns the group's committed offset of partition 0 of topic (-1: none).
func committedOffset(t testing.TB, brokers []string, group, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(brokers...)}
	res, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: {0}}})
	if err != nil {
		t.Fatalf("offset fetch: %v", err)
	}
	if res.Error != nil {
		t.Fatalf("offset fetch: %v", res.Error)
	}
	parts := res.Topics[topic]
	if len(parts) == 0 {
		return -1
	}
	return parts[0].CommittedOffset
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// metricValue returns the value of the counter or gauge name with exactly labels (0 if absent).
func metricValue(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue metrics
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

func readDeadLetters(t testing.TB, brokers []string, n int) []kafka.Message {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: pb.TopicDeadLetter, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var msgs []kafka.Message
	for range n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read dead letter %d of %d: %v", len(msgs)+1, n, err)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

func TestStoresValidAndDeadLettersInvalid(t *testing.T) {
	brokers := localtest.FakeKafka(t)
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn

	garbage := kafka.Message{Topic: pb.TopicSamples, Key: []byte("node-x"), Value: []byte{0xff, 0xff, 0xff},
		Headers: []kafka.Header{{Key: "trace", Value: []byte("t1")}}}
	partlyInvalid := &pb.SampleBatch{Node: "node-b", Samples: []*pb.Sample{
		sample(pb.Kind_KIND_GPU, "gpu0", base),
		sample(pb.Kind_KIND_GPU, "gpu1", 0),            // missing_ts
		sample(pb.Kind_KIND_UNSPECIFIED, "gpu2", base), // unknown_kind
	}}
	produce(t, brokers,
		sampleMessage(t, &pb.SampleBatch{Node: "node-a", Seq: 1, Samples: []*pb.Sample{
			sample(pb.Kind_KIND_GPU, "gpu0", base),
			sample(pb.Kind_KIND_MIG, "gpu1/mig0", base),
			sample(pb.Kind_KIND_VGPU, "gpu2/vgpu0", base),
		}}),
		garbage,
		sampleMessage(t, partlyInvalid),
		sampleMessage(t, &pb.SampleBatch{Node: "node-a", Seq: 2, Samples: []*pb.Sample{
			sample(pb.Kind_KIND_GPU, "gpu0", base+100_000_000),
			sample(pb.Kind_KIND_MIG, "gpu1/mig0", base+100_000_000),
		}}),
		allocationMessage(t, &pb.AllocationEvent{AllocationId: "a1", Tenant: "acme", Tier: "pro",
			Node: "node-a", InstanceId: "gpu1/mig0", RequestedAtNs: allocT0 + 1, StartedAtNs: allocT0 + 2, Version: 1}),
		allocationMessage(t, &pb.AllocationEvent{AllocationId: "a2", Tenant: "acme", Tier: "pro",
			Node: "node-a", InstanceId: "gpu0", RequestedAtNs: allocT0 + 1, StartedAtNs: allocT0 + 5, EndedAtNs: allocT0 + 5, Version: 1}),
	)

	const group = "stores"
	c, reg, stop := startCollector(t, Config{Brokers: brokers, GroupID: group, FlushInterval: 100 * time.Millisecond}, conn)
	waitFor(t, 20*time.Second, "6 samples and 1 allocation stored", func() bool {
		s, a := c.Stored()
		return s == 6 && a == 1
	})
	waitFor(t, 10*time.Second, "offsets committed", func() bool {
		return committedOffset(t, brokers, group, pb.TopicSamples) == 4 &&
			committedOffset(t, brokers, group, pb.TopicAllocations) == 2
	})

	ctx := context.Background()
	var count uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM samples").Scan(&count); err != nil {
		t.Fatal(err)
	}
	if count != 6 {
		t.Errorf("samples has %d rows, want 6", count)
	}
	var (
		tm      time.Time
		kind    string
		node    string
		waits   []uint64
		tsNs    uint64
		switch_ uint64
	)
	err := conn.QueryRow(ctx, "SELECT time, kind, node, vgpu_waits_ns, ts_ns, vgpu_switch_ns FROM samples WHERE instance_id = 'gpu2/vgpu0'").
		Scan(&tm, &kind, &node, &waits, &tsNs, &switch_)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Unix(int64(base/1e9), 0); !tm.Equal(want) || kind != "vgpu" || node != "node-a" ||
		tsNs != base || switch_ != 20_000 || len(waits) != 2 || waits[1] != 6_020_000 {
		t.Errorf("vgpu row: time %s kind %s node %s waits %v ts %d switch %d", tm, kind, node, waits, tsNs, switch_)
	}
	var kinds []string
	rows, err := conn.Query(ctx, "SELECT DISTINCT kind FROM samples ORDER BY kind")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		rows.Scan(&k)
		kinds = append(kinds, k)
	}
	rows.Close()
	if strings.Join(kinds, ",") != "gpu,mig,vgpu" {
		t.Errorf("kinds %v", kinds)
	}
	var (
		tenant   string
		started  int64
		received time.Time
	)
	if err := conn.QueryRow(ctx, "SELECT tenant, started_ns, received FROM allocations WHERE allocation_id = 'a1'").Scan(&tenant, &started, &received); err != nil {
		t.Fatal(err)
	}
	if tenant != "acme" || started != allocT0+2 || time.Since(received) > time.Minute {
		t.Errorf("allocation row: tenant %s started %d received %s", tenant, started, received)
	}

	dead := readDeadLetters(t, brokers, 3)
	// Messages of the two source topics interleave in any order; compare in a fixed one.
	slices.SortFunc(dead, func(a, b kafka.Message) int {
		return cmp.Or(cmp.Compare(header(b, HeaderSourceTopic), header(a, HeaderSourceTopic)),
			cmp.Compare(header(a, HeaderSourceOffset), header(b, HeaderSourceOffset)))
	})
	type dl struct{ reason, topic, partition, offset, key, value string }
	var got []dl
	for _, m := range dead {
		got = append(got, dl{header(m, HeaderReason), header(m, HeaderSourceTopic), header(m, HeaderSourcePartition),
			header(m, HeaderSourceOffset), string(m.Key), string(m.Value)})
	}
	partlyValue, _ := proto.Marshal(partlyInvalid)
	want := []dl{
		{reasonDecode, pb.TopicSamples, "0", "1", "node-x", string(garbage.Value)},
		{reasonMissingTimestamp, pb.TopicSamples, "0", "2", "node-b", string(partlyValue)},
		{reasonEndedNotAfterStarted, pb.TopicAllocations, "0", "1", "acme", ""},
	}
	for i := range want {
		if i >= len(got) {
			break
		}
		w, g := want[i], got[i]
		if w.value == "" {
			g.value = ""
		}
		if g != w {
			t.Errorf("dead letter %d: got %+v\nwant %+v", i, g, w)
		}
	}
	if header(dead[0], "trace") != "t1" {
		t.Errorf("dead letter lost the original headers: %v", dead[0].Headers)
	}
	if d := header(dead[1], HeaderReasonDetail); !strings.Contains(d, "2 of 3 samples") {
		t.Errorf("detail %q", d)
	}

	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"slicemeter_collector_messages_consumed_total", map[string]string{"topic": pb.TopicSamples}, 4},
		{"slicemeter_collector_messages_consumed_total", map[string]string{"topic": pb.TopicAllocations}, 2},
		{"slicemeter_collector_samples_stored_total", nil, 6},
		{"slicemeter_collector_samples_energy_estimated_total", nil, 6}, // no counter in them
		{"slicemeter_collector_allocations_stored_total", nil, 1},
		{"slicemeter_collector_deadlettered_total", map[string]string{"topic": pb.TopicSamples, "reason": reasonDecode}, 1},
		{"slicemeter_collector_deadlettered_total", map[string]string{"topic": pb.TopicSamples, "reason": reasonMissingTimestamp}, 1},
		{"slicemeter_collector_deadlettered_total", map[string]string{"topic": pb.TopicAllocations, "reason": reasonEndedNotAfterStarted}, 1},
		{"slicemeter_collector_samples_dropped_total", map[string]string{"reason": reasonMissingTimestamp}, 1},
		{"slicemeter_collector_samples_dropped_total", map[string]string{"reason": reasonUnknownKind}, 1},
		{"slicemeter_collector_insert_errors_total", map[string]string{"table": "samples"}, 0},
	} {
		if got := metricValue(t, reg, tc.name, tc.labels); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	if metricValue(t, reg, "slicemeter_collector_insert_duration_seconds", map[string]string{"table": "samples"}) == 0 {
		t.Error("no insert duration observed")
	}
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestCommitsOnlyAfterInsert points the collector at a stopped ClickHouse: nothing may be
// committed and fetching must pause; once ClickHouse is back, everything lands and is committed.
func TestCommitsOnlyAfterInsert(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ch := localtest.NewClickHouse(t) // of its own: the test stops it
	// ClickHouse 18.16 waits for open client connections when stopped (10 s, then SIGKILL):
	// close ours first and give the collector a connection that dials lazily.
	db := localtest.Database(t, localtest.DatabaseOptions{Server: ch})
	db.Conn.Close()
	if err := ch.Stop(); err != nil {
		t.Fatal(err)
	}
	opts, err := clickhouse.ParseDSN(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := clickhouse.Open(opts) // no Ping, unlike chconn.Open: the server is down
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })

	brokers := localtest.FakeKafka(t)
	batch := func(seq uint64) kafka.Message {
		return sampleMessage(t, &pb.SampleBatch{Node: "node-a", Seq: seq, Samples: []*pb.Sample{
			sample(pb.Kind_KIND_GPU, "gpu0", base+seq*100_000_000),
		}})
	}
	produce(t, brokers, batch(1), batch(2))

	const group = "down"
	c, reg, _ := startCollector(t, Config{Brokers: brokers, GroupID: group, FlushInterval: 100 * time.Millisecond,
		RetryMin: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond}, conn)
	errorsLabel := map[string]string{"table": "samples"}
	waitFor(t, 20*time.Second, "failed inserts", func() bool {
		return metricValue(t, reg, "slicemeter_collector_insert_errors_total", errorsLabel) >= 2
	})
	consumedLabel := map[string]string{"topic": pb.TopicSamples}
	if got := metricValue(t, reg, "slicemeter_collector_messages_consumed_total", consumedLabel); got != 2 {
		t.Fatalf("consumed %v messages before the first flush, want 2", got)
	}
	// More messages while the flush is pending: they fill the next batch, which then waits
	// for the first; beyond those two batches nothing is fetched.
	produce(t, brokers, batch(3), batch(4), batch(5))
	waitFor(t, 10*time.Second, "the second batch fetched", func() bool {
		return metricValue(t, reg, "slicemeter_collector_messages_consumed_total", consumedLabel) == 5
	})
	time.Sleep(300 * time.Millisecond) // the second batch is due: it now waits for the first
	produce(t, brokers, batch(6), batch(7))
	time.Sleep(500 * time.Millisecond)
	if got := metricValue(t, reg, "slicemeter_collector_messages_consumed_total", consumedLabel); got != 5 {
		t.Errorf("consumed %v messages while ClickHouse was down, want 5 (two batches; fetching must pause)", got)
	}
	if got := metricValue(t, reg, "slicemeter_collector_pending_messages", nil); got != 5 {
		t.Errorf("pending_messages = %v while ClickHouse was down, want 5", got)
	}
	if off := committedOffset(t, brokers, group, pb.TopicSamples); off != -1 {
		t.Errorf("committed offset %d while ClickHouse was down, want none", off)
	}
	if s, _ := c.Stored(); s != 0 {
		t.Errorf("Stored() = %d while ClickHouse was down", s)
	}

	if err := ch.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "7 samples stored", func() bool { s, _ := c.Stored(); return s == 7 })
	waitFor(t, 10*time.Second, "offset 7 committed", func() bool {
		return committedOffset(t, brokers, group, pb.TopicSamples) == 7
	})
	var count uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM samples").Scan(&count); err != nil {
		t.Fatal(err)
	}
	if count != 7 {
		t.Errorf("samples has %d rows, want 7", count)
	}
}

// TestFinalFlushOnShutdown: what is pending when Run's context ends is stored and committed.
func TestFinalFlushOnShutdown(t *testing.T) {
	brokers := localtest.FakeKafka(t)
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn
	produce(t, brokers, sampleMessage(t, &pb.SampleBatch{Node: "node-a", Samples: []*pb.Sample{
		sample(pb.Kind_KIND_GPU, "gpu0", base), sample(pb.Kind_KIND_GPU, "gpu1", base),
	}}))
	const group = "shutdown"
	c, reg, stop := startCollector(t, Config{Brokers: brokers, GroupID: group, FlushInterval: time.Hour}, conn)
	waitFor(t, 20*time.Second, "the message fetched", func() bool {
		return metricValue(t, reg, "slicemeter_collector_messages_consumed_total", map[string]string{"topic": pb.TopicSamples}) == 1
	})
	if s, _ := c.Stored(); s != 0 {
		t.Fatalf("stored %d before the flush interval", s)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if s, _ := c.Stored(); s != 2 {
		t.Errorf("Stored() = %d after shutdown, want 2", s)
	}
	if off := committedOffset(t, brokers, group, pb.TopicSamples); off != 1 {
		t.Errorf("committed offset %d after shutdown, want 1", off)
	}
}
