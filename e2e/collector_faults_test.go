package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/collector"
	"github.com/slicemeter/slicemeter/deploy/local"
	"github.com/slicemeter/slicemeter/internal/chconn"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// faultLoad produces sample batches (and 1 % malformed messages) until stopped, retrying
// writes through broker outages, and remembers exactly what it produced.
type faultLoad struct {
	mu        sync.Mutex
	samples   uint64  // distinct valid samples produced
	smSum     float64 // their sum of sm_active
	waits     uint64  // their vGPU waits
	malformed map[string]bool
	seconds   int
}

const (
	faultNodes     = 16
	faultInstances = 7 // per node: 3 MIG, 4 vGPU
	faultTicks     = 10
	faultBase      = uint64(1_767_571_200_000_000_000) // 2026-01-05T00:00:00Z
)

// batch is node n's SampleBatch for second k.
func faultBatch(n, k int) *pb.SampleBatch {
	b := &pb.SampleBatch{Node: fmt.Sprintf("node-%02d", n), Seq: uint64(k)}
	for i := range faultInstances {
		for tick := range faultTicks {
			s := &pb.Sample{
				TsNs: faultBase + uint64(k)*1e9 + uint64(tick)*1e8, IntervalNs: 1e8, GpuUuid: "GPU-0",
				Model: "H100-SXM5-80GB", Kind: pb.Kind_KIND_MIG, InstanceId: fmt.Sprintf("gpu0/mig%d", i),
				Attached: true, SmActive: float64((k+i+tick)%8) / 8, MemTotalBytes: 10 << 30,
			}
			if i >= 3 {
				s.Kind, s.InstanceId = pb.Kind_KIND_VGPU, fmt.Sprintf("gpu1/vgpu%d", i)
				s.Vgpu = &pb.VgpuSchedule{RunNs: 25e6, SwitchNs: 2e4, WaitsNs: []uint64{6e6 + uint64(tick)*1e3, 6e6}}
			}
			b.Samples = append(b.Samples, s)
		}
	}
	return b
}

func (l *faultLoad) run(ctx context.Context, t *testing.T, brokers []string, perSecond time.Duration) error {
	w := kafkaconn.NewWriter(brokers, pb.TopicSamples, nil)
	defer w.Close()
	for k := 0; ctx.Err() == nil; k++ {
		var msgs []kafka.Message
		var add []*pb.SampleBatch
		for n := range faultNodes {
			b := faultBatch(n, k)
			v, err := proto.Marshal(b)
			if err != nil {
				return err
			}
			msgs = append(msgs, kafka.Message{Key: []byte(b.Node), Value: v})
			add = append(add, b)
		}
		// 1 % malformed: one in 100 messages, each unique so that dead letters can be matched.
		var bad []string
		if k*faultNodes/100 != (k+1)*faultNodes/100 {
			v := fmt.Sprintf("\xff\xff\xffmalformed-%d", k)
			msgs = append(msgs, kafka.Message{Key: []byte("node-bad"), Value: []byte(v)})
			bad = append(bad, v)
		}
		// A failed write may still have been stored, so a round is retried until it is
		// acknowledged (duplicates are fine: producing is at least once too) and never
		// abandoned half-way: stopping happens only between rounds.
		for attempt := 1; ; attempt++ {
			writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			err := w.WriteMessages(writeCtx, msgs...)
			cancel()
			if err == nil {
				break
			}
			if attempt == 100 {
				return fmt.Errorf("producer gave up: %w", err)
			}
			t.Logf("producer: %.200v (retrying)", err)
			time.Sleep(200 * time.Millisecond)
		}
		l.mu.Lock()
		for _, b := range add {
			for _, s := range b.Samples {
				l.samples++
				l.smSum += s.SmActive
				l.waits += uint64(len(s.GetVgpu().GetWaitsNs()))
			}
		}
		for _, v := range bad {
			l.malformed[v] = true
		}
		l.seconds = k + 1
		l.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(perSecond):
		}
	}
	return nil
}

// TestCollectorFaults: under load, the collector is killed with SIGKILL five times, ClickHouse
// is stopped and started, the Kafka broker restarts, and 1 % of the messages are malformed.
// Afterwards every produced sample is stored exactly once in the raw table and in both
// rollups, and every malformed message is on the dead-letter topic.
func TestCollectorFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real ClickHouse and Kafka")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
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
	dsn := ch.DSN("e2e_faults")
	if r := slicemeter(t, ctx, "migrate", "--clickhouse.dsn", dsn); r.code != 0 {
		t.Fatalf("migrate exited %d\n%s", r.code, r.stderr)
	}
	brokers := kafkaconn.ParseBrokers(kfk.Brokers())
	const partitions = 4
	if err := kafkaconn.EnsureTopics(ctx, brokers, partitions, pb.TopicSamples, pb.TopicAllocations, pb.TopicDeadLetter); err != nil {
		t.Fatal(err)
	}

	logDir := t.TempDir()
	var col *exec.Cmd
	starts := 0
	startCollector := func() {
		starts++
		logFile, err := os.Create(filepath.Join(logDir, fmt.Sprintf("collector-%d.log", starts)))
		if err != nil {
			t.Fatal(err)
		}
		col = exec.CommandContext(ctx, binary, "collector", "--kafka.brokers", kfk.Brokers(), "--clickhouse.dsn", dsn,
			"--web.listen-address", "127.0.0.1:0", "--collector.flush-interval", "200ms", "--kafka.partitions", strconv.Itoa(partitions),
			"--log.level", "debug") // debug: every insert is logged with its rows
		col.Stdout, col.Stderr = logFile, logFile
		if err := col.Start(); err != nil {
			t.Fatal(err)
		}
	}
	logs := func() string {
		var b strings.Builder
		for i := 1; i <= starts; i++ {
			data, _ := os.ReadFile(filepath.Join(logDir, fmt.Sprintf("collector-%d.log", i)))
			fmt.Fprintf(&b, "--- collector run %d ---\n%s", i, logTail(string(data), 3000))
		}
		return b.String()
	}
	startCollector()
	defer func() {
		if col.ProcessState == nil {
			col.Process.Kill()
			col.Wait()
		}
	}()

	load := &faultLoad{malformed: map[string]bool{}}
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan error, 1)
	go func() { loadDone <- load.run(loadCtx, t, brokers, 50*time.Millisecond) }() // ~22k samples/s
	defer stopLoad()

	// Five SIGKILLs under load, 1 to 2 s apart, each followed by a restart.
	for i := range 5 {
		time.Sleep(time.Second + time.Duration(i)*250*time.Millisecond)
		if err := col.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		col.Wait()
		startCollector()
	}

	// ClickHouse down: the collector keeps running, commits nothing and stays small.
	time.Sleep(2 * time.Second)
	if err := ch.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the flush in flight fails
	before := committed(t, ctx, brokers, partitions)
	time.Sleep(8 * time.Second)
	if after := committed(t, ctx, brokers, partitions); after != before {
		t.Errorf("offsets committed while ClickHouse was down: %d then %d", before, after)
	}
	if rss := rssBytes(t, col.Process.Pid); rss > 512<<20 {
		t.Errorf("collector RSS %d MiB while ClickHouse was down", rss>>20)
	}
	if col.ProcessState != nil {
		t.Fatalf("collector exited while ClickHouse was down\n%s", logs())
	}
	if err := ch.Restart(ctx); err != nil {
		t.Fatal(err)
	}

	// Kafka broker restart.
	time.Sleep(3 * time.Second)
	if err := kfk.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	stopLoad()
	if err := <-loadDone; err != nil {
		t.Fatal(err)
	}

	conn, err := chconn.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	want := load.samples
	t.Logf("produced %d samples in %d seconds × %d nodes, %d malformed messages", want, load.seconds, faultNodes, len(load.malformed))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got := queryUint(t, ctx, conn, "SELECT count() FROM (SELECT DISTINCT node, instance_id, ts_ns FROM samples)")
		if got == want {
			break
		}
		if got > want || time.Now().After(deadline) {
			t.Fatalf("stored %d distinct samples, produced %d\n%s", got, want, logs())
		}
		time.Sleep(500 * time.Millisecond)
	}
	// Let the last flush's rollups and commit finish, then stop cleanly.
	time.Sleep(time.Second)
	if err := col.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := col.Wait(); err != nil {
		t.Errorf("collector did not stop cleanly: %v\n%s", err, logs())
	}

	// Rollups: every sample counted exactly once, although batches were inserted again.
	for _, table := range []string{"samples_1s", "samples_1m"} {
		var samples, waits uint64
		var smSum float64
		err := conn.QueryRow(ctx, `SELECT sum(samples), sum(sm_active_sum), sum(arraySum(wait_count))
            FROM (SELECT samples, sm_active_sum, wait_count FROM `+table+`
                  ORDER BY samples DESC LIMIT 1 BY node, instance_id, time)`).Scan(&samples, &smSum, &waits)
		if err != nil {
			t.Fatal(err)
		}
		if samples != want || waits != load.waits || smSum-load.smSum > 1e-6*load.smSum || load.smSum-smSum > 1e-6*load.smSum {
			t.Errorf("%s: %d samples, sm_active sum %.3f, %d waits; produced %d, %.3f, %d",
				table, samples, smSum, waits, want, load.smSum, load.waits)
		}
	}
	// The kills did interrupt batches: more rows were inserted than produced (replays), and
	// yet every count above is exact.
	inserted := insertedRows(t, logDir, starts)
	t.Logf("inserted %d sample rows for %d produced samples over %d collector runs (%d replayed)", inserted, want, starts, inserted-want)
	if inserted < want {
		t.Errorf("the collectors' logs show %d inserted sample rows, fewer than the %d stored", inserted, want)
	}

	// Dead letters: every malformed message, with its reason.
	dead := readTopic(t, ctx, brokers, pb.TopicDeadLetter, partitions)
	seen := map[string]bool{}
	for _, m := range dead {
		if r := headerValue(m, collector.HeaderReason); r != "decode" {
			t.Errorf("dead letter with reason %q", r)
		}
		seen[string(m.Value)] = true
	}
	for v := range load.malformed {
		if !seen[v] {
			t.Errorf("malformed message %q not dead-lettered", v)
		}
	}
	if len(seen) != len(load.malformed) {
		t.Errorf("%d distinct dead letters, %d malformed messages produced", len(seen), len(load.malformed))
	}
}

// insertedRows sums the rows of the collectors' "inserted ... table=samples rows=N" debug lines.
func insertedRows(t *testing.T, logDir string, runs int) uint64 {
	t.Helper()
	var total uint64
	for i := 1; i <= runs; i++ {
		data, err := os.ReadFile(filepath.Join(logDir, fmt.Sprintf("collector-%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if !strings.Contains(line, "msg=inserted") || !strings.Contains(line, "table=samples ") {
				continue
			}
			_, rest, _ := strings.Cut(line, " rows=")
			n, err := strconv.ParseUint(strings.Fields(rest)[0], 10, 64)
			if err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			total += n
		}
	}
	return total
}

func queryUint(t *testing.T, ctx context.Context, conn driver.Conn, q string) uint64 {
	t.Helper()
	var n uint64
	if err := conn.QueryRow(ctx, q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// committed sums the collector group's committed offsets of the samples topic.
func committed(t *testing.T, ctx context.Context, brokers []string, partitions int) int64 {
	t.Helper()
	ids := make([]int, partitions)
	for i := range ids {
		ids[i] = i
	}
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 5 * time.Second}
	res, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: collector.DefaultGroupID,
		Topics: map[string][]int{pb.TopicSamples: ids}})
	if err == nil && res.Error != nil {
		err = res.Error
	}
	if err != nil {
		t.Fatalf("offset fetch: %v", err)
	}
	var total int64
	for _, p := range res.Topics[pb.TopicSamples] {
		total += max(0, p.CommittedOffset)
	}
	return total
}

// readTopic reads every message of topic's partitions 0..partitions-1.
func readTopic(t *testing.T, ctx context.Context, brokers []string, topic string, partitions int) []kafka.Message {
	t.Helper()
	var out []kafka.Message
	for p := range partitions {
		conn, err := kafka.DialLeader(ctx, "tcp", brokers[0], topic, p)
		if err != nil {
			t.Fatal(err)
		}
		last, err := conn.ReadLastOffset()
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		if last == 0 {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: p, MaxWait: 100 * time.Millisecond})
		for {
			readCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			m, err := r.ReadMessage(readCtx)
			cancel()
			if err != nil {
				r.Close()
				t.Fatalf("read %s/%d: %v", topic, p, err)
			}
			out = append(out, m)
			if m.Offset >= last-1 {
				break
			}
		}
		r.Close()
	}
	return out
}

func headerValue(m kafka.Message, key string) string {
	for i := len(m.Headers) - 1; i >= 0; i-- {
		if m.Headers[i].Key == key {
			return string(m.Headers[i].Value)
		}
	}
	return ""
}

// rssBytes reads a process's resident set size from /proc.
func rssBytes(t *testing.T, pid int) uint64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("no /proc")
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}

func logTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
