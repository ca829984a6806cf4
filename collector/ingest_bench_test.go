package collector

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// benchSamples is how many samples BenchmarkIngestVsKafkaEngine moves; SLICEMETER_BENCH_SAMPLES
// overrides it.
const benchSamples = 2_000_000

// BenchmarkIngestVsKafkaEngine puts the same samples on a real Kafka 4.4 broker, then measures
// the collector (Kafka → raw table + rollups, offsets committed) and ClickHouse's own Kafka
// table engine with a materialized view into an equivalent table, on the same ClickHouse. Its
// last output line is "ingest: N samples/s; clickhouse kafka engine: ...". make bench runs it.
//
//	go test ./collector -run '^$' -bench IngestVsKafkaEngine -benchtime 1x
func BenchmarkIngestVsKafkaEngine(b *testing.B) {
	total := benchSamples
	if v, err := strconv.Atoi(os.Getenv("SLICEMETER_BENCH_SAMPLES")); err == nil && v > 0 {
		total = v
	}
	k := localtest.NewKafka(b) // of its own: its topics get the partitions below
	brokers := kafkaconn.ParseBrokers(k.Brokers())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const partitions = 4
	const jsonTopic = "bench.samples.json"
	if err := (kafkaconn.Cluster{Brokers: brokers}).EnsureTopics(ctx, partitions, pb.TopicSamples, pb.TopicAllocations, pb.TopicDeadLetter, jsonTopic); err != nil {
		b.Fatal(err)
	}
	// A server of its own: the Kafka engine's consumer must start at the oldest message (its
	// librdkafka default is the newest), which is server configuration.
	ch := localtest.NewClickHouse(b)
	if err := ch.AddConfig("kafka", kafkaEngineConfig); err != nil {
		b.Fatal(err)
	}
	if err := ch.Restart(ctx); err != nil {
		b.Fatal(err)
	}
	conn := localtest.Database(b, localtest.DatabaseOptions{Server: ch}).Conn

	// 7 instances × 100 ticks per message: one node's 10 s, as an exporter flushing every 10 s sends.
	const perMessage = 700
	messages := total / perMessage
	total = messages * perMessage
	w := kafkaconn.Cluster{Brokers: brokers}.NewWriter("", nil)
	defer w.Close()
	var batch []kafka.Message
	var jsonBatch []kafka.Message
	for m := range messages {
		sb := &pb.SampleBatch{Node: fmt.Sprintf("node-%04d", m%1000)}
		tick0 := base + uint64(m/1000)*10e9
		for i := range 7 {
			for tick := range 100 {
				kind := pb.Kind_KIND_MIG
				if i >= 4 {
					kind = pb.Kind_KIND_VGPU
				}
				sb.Samples = append(sb.Samples, sample(kind, fmt.Sprintf("gpu%d/x%d", i/4, i), tick0+uint64(tick)*1e8))
			}
		}
		v, err := proto.Marshal(sb)
		if err != nil {
			b.Fatal(err)
		}
		batch = append(batch, kafka.Message{Topic: pb.TopicSamples, Key: []byte(sb.Node), Value: v})
		jsonBatch = append(jsonBatch, kafka.Message{Topic: jsonTopic, Key: []byte(sb.Node), Value: jsonRows(b, sb)})
		if len(batch) == 200 || m == messages-1 {
			if err := w.WriteMessages(ctx, append(batch, jsonBatch...)...); err != nil {
				b.Fatal(err)
			}
			batch, jsonBatch = batch[:0], jsonBatch[:0]
		}
	}

	b.ResetTimer()
	reg := prometheus.NewRegistry()
	c, err := New(Config{Brokers: brokers, GroupID: "bench", FlushRows: 200_000, FlushInterval: time.Second}, conn, reg, nil)
	if err != nil {
		b.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- c.Run(runCtx) }()
	// Sustained: from the first 10 % stored (the consumer group has formed) to the last
	// offset committed.
	var tenth time.Time
	var tenthStored uint64
	for c.Committed() < uint64(messages) {
		if ctx.Err() != nil {
			b.Fatal("collector did not finish")
		}
		if s, _ := c.Stored(); tenth.IsZero() && s >= uint64(total/10) {
			tenth, tenthStored = time.Now(), s
		}
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	sustainedFor := time.Since(tenth)
	b.StopTimer()
	stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	ingest := float64(uint64(total)-tenthStored) / sustainedFor.Seconds()
	b.ReportMetric(ingest, "samples/s")
	b.ReportMetric(float64(total)/elapsed.Seconds(), "samples/s-with-group-join")
	var bytesPerSample float64
	if err := conn.QueryRow(ctx, `SELECT sum(data_compressed_bytes) / sum(rows) FROM system.parts
        WHERE database = currentDatabase() AND table = 'samples' AND active`).Scan(&bytesPerSample); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(bytesPerSample, "disk-bytes/sample")

	// Where the time went: ClickHouse's side of the flushes (the rest is fetching and decoding,
	// which overlaps them).
	insertSum, _ := histogramSum(b, reg, "slicemeter_collector_insert_duration_seconds", "samples")
	rollupSum, flushes := histogramSum(b, reg, "slicemeter_collector_insert_duration_seconds", "samples_1s")
	fmt.Printf("collector: %d flushes in %.2f s; raw inserts %.2f s, rollup recomputation %.2f s\n",
		flushes, elapsed.Seconds(), insertSum, rollupSum)
	st := c.rollupStats
	fmt.Printf("rollups: %d seconds and %d minutes computed in memory, %d seconds and %d minutes recomputed; check %.2f s, compute %.2f s, insert %.2f s, recompute %.2f s\n",
		st.memorySeconds, st.memoryMinutes, st.recomputedSeconds, st.recomputedMinutes,
		st.check.Seconds(), st.compute.Seconds(), st.insert.Seconds(), st.recompute.Seconds())

	engine := kafkaEngineRate(b, ctx, conn, k.Brokers(), jsonTopic, total)
	if engine.err != "" {
		engine.err += "; server log: " + kafkaLogLines(filepath.Join(ch.Dir(), "log", "clickhouse-server.err.log"))
	}
	fmt.Printf("raw table: %.1f bytes/sample on disk (%d samples)\n", bytesPerSample, total)
	if engine.err != "" {
		fmt.Printf("ingest: %.0f samples/s; clickhouse kafka engine: not measured (%s); ratio n/a\n", ingest, engine.err)
		return
	}
	fmt.Printf("ingest: %.0f samples/s; clickhouse kafka engine: %.0f samples/s; ratio %.2f\n", ingest, engine.rate, ingest/engine.rate)
}

// kafkaEngineConfig passes librdkafka settings to ClickHouse's Kafka engine ('.' becomes '_').
const kafkaEngineConfig = `<yandex><kafka><auto_offset_reset>smallest</auto_offset_reset></kafka></yandex>`

// jsonRows renders a batch as JSONEachRow lines for the Kafka engine, which on 18.16 has no
// Protobuf input format.
func jsonRows(b *testing.B, sb *pb.SampleBatch) []byte {
	var out []byte
	for _, s := range sb.Samples {
		row := map[string]any{
			"time": time.Unix(int64(s.GetTsNs()/1e9), 0).UTC().Format(time.DateTime), "ts_ns": s.GetTsNs(), "interval_ns": s.GetIntervalNs(), "node": sb.Node,
			"gpu_uuid": s.GetGpuUuid(), "gpu_index": s.GetGpuIndex(), "model": s.GetModel(), "kind": s.GetKind().Label(),
			"instance_id": s.GetInstanceId(), "profile": s.GetProfile(), "attached": 1, "sm_active": s.GetSmActive(),
			"mem_used_bytes": s.GetMemUsedBytes(), "mem_total_bytes": s.GetMemTotalBytes(), "power_watts": s.GetPowerWatts(),
			"compute_slices": s.GetComputeSlices(), "sm_count": s.GetSmCount(), "gpu_sm_count": s.GetGpuSmCount(),
			"gpu_mem_total_bytes": s.GetGpuMemTotalBytes(), "vgpu_run_ns": s.GetVgpu().GetRunNs(),
			"vgpu_switch_ns": s.GetVgpu().GetSwitchNs(), "vgpu_waits_ns": append([]uint64{}, s.GetVgpu().GetWaitsNs()...),
			"sm_active_unavailable": boolUint8(s.GetSmActiveUnavailable()),
		}
		line, err := json.Marshal(row)
		if err != nil {
			b.Fatal(err)
		}
		out = append(append(out, line...), '\n')
	}
	return out
}

// histogramSum returns the sum and count of the histogram name with label table=table.
func histogramSum(b *testing.B, reg *prometheus.Registry, name, table string) (float64, uint64) {
	families, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "table" && l.GetValue() == table {
					return m.GetHistogram().GetSampleSum(), m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0, 0
}

// kafkaLogLines returns the last distinct Kafka-related lines of ClickHouse's error log.
func kafkaLogLines(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var lines []string
	seen := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.Contains(line, "Kafka") && !strings.Contains(line, "rdkafka") {
			continue
		}
		// Drop the timestamp and thread prefix so repeats collapse.
		if i := strings.Index(line, "<"); i >= 0 {
			line = line[i:]
		}
		if !seen[line] {
			seen[line] = true
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		return "no Kafka lines"
	}
	return strings.Join(lines[max(0, len(lines)-3):], " | ")
}

type engineResult struct {
	rate float64
	err  string // why it could not be measured
}

// kafkaEngineRate creates a Kafka engine table on topic, a table like samples and a
// materialized view between them, and measures how fast rows arrive (up to 2 minutes).
func kafkaEngineRate(b *testing.B, ctx context.Context, conn driver.Conn, brokers, topic string, total int) engineResult {
	const columns = `time DateTime, ts_ns UInt64, interval_ns UInt64, node String, gpu_uuid String,
        gpu_index UInt32, model String, kind String, instance_id String, profile String, attached UInt8,
        sm_active Float64, mem_used_bytes UInt64, mem_total_bytes UInt64, power_watts Float64,
        compute_slices UInt32, sm_count UInt32, gpu_sm_count UInt32, gpu_mem_total_bytes UInt64,
        vgpu_run_ns UInt64, vgpu_switch_ns UInt64, vgpu_waits_ns Array(UInt64), sm_active_unavailable UInt8`
	// Protobuf first: the same messages the collector read. The format is looked up only
	// when the engine reads, so read once to learn whether the server knows it.
	protoErr := conn.Exec(ctx, `CREATE TABLE kafka_proto (`+columns+`) ENGINE = Kafka('`+brokers+`', '`+pb.TopicSamples+`', 'ch-proto', 'Protobuf')`)
	if protoErr == nil {
		var n uint64
		protoErr = conn.QueryRow(ctx, "SELECT count() FROM kafka_proto").Scan(&n)
		_ = conn.Exec(ctx, "DROP TABLE kafka_proto")
	}
	if protoErr != nil {
		fmt.Printf("clickhouse kafka engine cannot read the collector's topic (Protobuf): %v; measuring it on the same samples as JSONEachRow\n", protoErr)
	}
	for _, stmt := range []string{
		`CREATE TABLE engine_samples (` + columns + `) ENGINE = ReplacingMergeTree() PARTITION BY toYYYYMMDD(time) ORDER BY (node, instance_id, ts_ns)`,
		`CREATE TABLE kafka_json (` + columns + `) ENGINE = Kafka('` + brokers + `', '` + topic + `', 'ch-json', 'JSONEachRow')`,
	} {
		if err := conn.Exec(ctx, stmt); err != nil {
			return engineResult{err: err.Error()}
		}
	}
	start := time.Now()
	if err := conn.Exec(ctx, `CREATE MATERIALIZED VIEW kafka_json_mv TO engine_samples AS SELECT * FROM kafka_json`); err != nil {
		return engineResult{err: err.Error()}
	}
	deadline := start.Add(2 * time.Minute)
	var n, last, tenthRows uint64
	var tenth time.Time
	lastChange := time.Now()
	for time.Now().Before(deadline) {
		if err := conn.QueryRow(ctx, "SELECT count() FROM engine_samples").Scan(&n); err != nil {
			return engineResult{err: err.Error()}
		}
		// Measured like the collector: from 10 % of the rows to all of them.
		if tenth.IsZero() && n >= uint64(total/10) {
			tenth, tenthRows = time.Now(), n
		}
		if n >= uint64(total) {
			if n == tenthRows { // all arrived between two polls
				return engineResult{rate: float64(n) / time.Since(start).Seconds()}
			}
			return engineResult{rate: float64(n-tenthRows) / time.Since(tenth).Seconds()}
		}
		if n != last {
			last, lastChange = n, time.Now()
		}
		// Stalled: nothing new for 30 s (or nothing at all for 45 s).
		if n > 0 && time.Since(lastChange) > 30*time.Second || n == 0 && time.Since(start) > 45*time.Second {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n == 0 {
		return engineResult{err: fmt.Sprintf("JSONEachRow from Kafka 4.4.0: 0 of %d rows after %s", total, time.Since(start).Round(time.Second))}
	}
	return engineResult{err: fmt.Sprintf("JSONEachRow from Kafka 4.4.0: only %d of %d rows in %s", n, total, time.Since(start).Round(time.Second))}
}
