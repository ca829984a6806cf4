package e2e

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/allocations"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/collector"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

const (
	faultNodes     = 16
	faultInstances = 7 // per node: 3 MIG, 4 vGPU
	faultTicks     = 10
	faultInterval  = uint64(1e8)                       // ns, 10 Hz
	faultSwitchNs  = uint64(2e4)                       // vGPU switch time per tick
	faultBase      = uint64(1_767_571_200_000_000_000) // 2026-01-05T00:00:00Z
	faultPriceBook = "../attribution/pricebook/testdata/prices.yaml"
	faultPrice     = 2.40 // the price book's H100-SXM5-80GB, one GPU-hour
	faultGPUSMs    = 132  // an H100-SXM5's SMs
	faultVGPUShare = 0.25 // H100-20C on an 80 GB GPU
)

// faultInstance is instance i of every node. GPU-0 is split into three MIG instances; the
// first is never allocated and its activity cannot be measured on one tick in three
// (sm_active_unavailable). GPU-1 carries four H100-20C vGPUs, each billed a quarter of it.
type faultInstance struct {
	id, profile string
	kind        pb.Kind
	slices, sms uint32 // MIG compute slices of 7, and SMs
}

var faultLayout = [faultInstances]faultInstance{
	{"gpu0/mig0", "1g.10gb", pb.Kind_KIND_MIG, 1, 16},
	{"gpu0/mig1", "2g.20gb", pb.Kind_KIND_MIG, 2, 32},
	{"gpu0/mig2", "3g.40gb", pb.Kind_KIND_MIG, 3, 60},
	{"gpu1/vgpu0", "H100-20C", pb.Kind_KIND_VGPU, 0, faultGPUSMs},
	{"gpu1/vgpu1", "H100-20C", pb.Kind_KIND_VGPU, 0, faultGPUSMs},
	{"gpu1/vgpu2", "H100-20C", pb.Kind_KIND_VGPU, 0, faultGPUSMs},
	{"gpu1/vgpu3", "H100-20C", pb.Kind_KIND_VGPU, 0, faultGPUSMs},
}

// faultTenant holds instances of faultLayout on every node, from faultBase on (open-ended).
type faultTenant struct {
	name, tier string
	multiplier float64 // the price book's, for tier
	instances  []int
}

var faultTenants = []faultTenant{
	{"mig-pro", "pro", 1.0, []int{1, 2}},
	{"vgpu-budget", "budget", 0.7, []int{3, 4, 5, 6}},
}

// faultSample is instance i's sample of tick tick of second k (the same on every node).
// vGPU activity stays below its share of the GPU so that efficiency never saturates: then
// the mean over a second (what the rollups keep) gives the same efficiency as the samples.
func faultSample(i, k, tick int) *pb.Sample {
	in := faultLayout[i]
	s := &pb.Sample{
		TsNs: faultBase + uint64(k)*1e9 + uint64(tick)*faultInterval, IntervalNs: faultInterval,
		Model: "H100-SXM5-80GB", Kind: in.kind, InstanceId: in.id, Profile: in.profile, Attached: true,
		SmCount: in.sms, GpuSmCount: faultGPUSMs, GpuMemTotalBytes: 80 << 30,
	}
	level := float64((k+i+tick)%8) / 8
	switch in.kind {
	case pb.Kind_KIND_MIG:
		s.GpuUuid, s.GpuIndex = "GPU-0", 0
		s.ComputeSlices, s.MemTotalBytes = in.slices, uint64(in.slices)*10<<30
		s.SmActive = level
		if i == 0 && tick%3 == 0 {
			s.SmActive, s.SmActiveUnavailable = 0, true
		}
	case pb.Kind_KIND_VGPU:
		s.GpuUuid, s.GpuIndex = "GPU-1", 1
		s.MemTotalBytes = 20 << 30
		s.SmActive = level / 5 // ≤ 0.175 < 0.25 × (1 − o)
		s.Vgpu = &pb.VgpuSchedule{RunNs: 25e6, SwitchNs: faultSwitchNs, WaitsNs: []uint64{6e6 + uint64(tick)*1e3, 6e6}}
	}
	return s
}

// faultBatch is node n's SampleBatch for second k.
func faultBatch(n, k int) *pb.SampleBatch {
	b := &pb.SampleBatch{Node: fmt.Sprintf("node-%02d", n), Seq: uint64(k)}
	for i := range faultInstances {
		for tick := range faultTicks {
			b.Samples = append(b.Samples, faultSample(i, k, tick))
		}
	}
	return b
}

// faultLoad produces sample batches (and 1 % malformed messages) until stopped, retrying
// writes through broker outages, and remembers exactly what it produced.
type faultLoad struct {
	mu         sync.Mutex
	samples    uint64  // distinct valid samples produced
	unmeasured uint64  // of which sm_active_unavailable
	smSum      float64 // sum of sm_active over the measured ones
	waits      uint64  // their vGPU waits
	// smByInstance[i] is instance i's sum of sm_active on one node (all nodes are alike).
	smByInstance [faultInstances]float64
	malformed    map[string]bool
	seconds      int // seconds produced: [faultBase, faultBase + seconds)
}

func (l *faultLoad) produced() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.samples
}

func (l *faultLoad) run(ctx context.Context, t *testing.T, brokers []string, perSecond time.Duration) error {
	w := kafkaconn.Cluster{Brokers: brokers}.NewWriter(pb.TopicSamples, nil)
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
		for n, b := range add {
			for j, s := range b.Samples {
				l.samples++
				l.waits += uint64(len(s.GetVgpu().GetWaitsNs()))
				if s.GetSmActiveUnavailable() {
					l.unmeasured++
					continue
				}
				l.smSum += s.GetSmActive()
				if n == 0 {
					l.smByInstance[j/faultTicks] += s.GetSmActive()
				}
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

// produceAllocations announces faultTenants' allocations: one per tenant instance per node,
// requested and started at faultBase, open-ended, each sent twice (versions 1 and 2: the
// second, identical, must not count twice either).
func produceAllocations(ctx context.Context, brokers []string) (int, error) {
	var events []*pb.AllocationEvent
	ids := 0
	for _, tn := range faultTenants {
		for n := range faultNodes {
			for _, i := range tn.instances {
				ids++
				for version := uint64(1); version <= 2; version++ {
					events = append(events, &pb.AllocationEvent{AllocationId: fmt.Sprintf("%s-%02d-%d", tn.name, n, i), Tenant: tn.name, Tier: tn.tier,
						Node: fmt.Sprintf("node-%02d", n), InstanceId: faultLayout[i].id,
						RequestedAtNs: int64(faultBase), StartedAtNs: int64(faultBase), Version: version})
				}
			}
		}
	}
	if err := allocations.Announce(ctx, kafkaconn.Cluster{Brokers: brokers}, events, nil); err != nil {
		return 0, fmt.Errorf("produce allocations: %w", err)
	}
	return ids, nil
}

// Memory bounds while ClickHouse is down. The collector holds at most three batches (one
// filling, two flushing), and a batch ends after one flush interval (200 ms here, a few
// thousand rows); fetching stops while they are stuck. What fills up instead is kafka-go's
// prefetch, also bounded: per partition one fetch of at most MaxBytes (16 MiB, compressed) and
// a queue of 100 messages; with 4 sample partitions and the Go heap's headroom, that is where
// the 150-170 MiB measured on the 2-core test machine come from (36 MiB before the outage,
// when there is nothing to prefetch), and they stay flat once the prefetch is full. Buffering
// the outage instead would hold its ≈1.3 M samples (60 s at ≈22 k/s) at ≥ 250 B each in the
// column buffers: ≥ 300 MiB, growing ≈ 5 MiB/s to the end. So the RSS must stay under
// maxOutageRSS all along and grow less than maxOutageGrowth over the outage's last 40 s
// (unbounded buffering: ≥ 200 MiB).
const (
	faultOutage     = 60 * time.Second
	maxOutageRSS    = 256 << 20
	maxOutageGrowth = 48 << 20
)

// TestCollectorFaults: under load, the collector is killed with SIGKILL five times, ClickHouse
// is down for 60 s, the Kafka broker restarts, and 1 % of the messages are malformed.
// Afterwards every produced sample is stored exactly once in the raw table and in both
// rollups, every malformed message is on the dead-letter topic, and the real `slicemeter
// report`, over the raw samples and over each rollup, gives exactly the totals that the
// produced samples and allocations imply: nothing replayed is counted twice.
func TestCollectorFaults(t *testing.T) {
	// In turn, not in parallel: it puts ~22k samples/s on the cores and asserts that at
	// least 5000/s were produced during the outage, which another test's load would make.
	began := time.Now()
	// A server and a broker of its own: the test stops and restarts them.
	ch, kfk := localtest.NewClickHouse(t), localtest.NewKafka(t)
	// A bound on a hung run, not a speed target: on a loaded machine (CI next to other work) the
	// outage, the catch-up and the checks took 5.5 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	db := localtest.Database(t, localtest.DatabaseOptions{Server: ch, Name: "e2e_faults", Unmigrated: true})
	dsn := db.DSN
	apptest.Migrate(t, ctx, dsn)
	brokers := kafkaconn.ParseBrokers(kfk.Brokers())
	const partitions = 4
	if err := (kafkaconn.Cluster{Brokers: brokers}).EnsureTopics(ctx, partitions, pb.TopicSamples, pb.TopicAllocations, pb.TopicDeadLetter); err != nil {
		t.Fatal(err)
	}

	var runs []*apptest.Process // every collector started, the running one last
	startCollector := func() {
		runs = append(runs, apptest.StartCollector(t, ctx, "--kafka.brokers", kfk.Brokers(), "--clickhouse.dsn", dsn,
			"--collector.flush-interval", "200ms", "--kafka.partitions", strconv.Itoa(partitions),
			"--log.level", "debug")) // debug: every insert is logged with its rows
	}
	col := func() *apptest.Process { return runs[len(runs)-1] }
	logs := func() string {
		var b strings.Builder
		for i, p := range runs {
			fmt.Fprintf(&b, "--- collector run %d ---\n%s", i+1, p.LogTail(30))
		}
		return b.String()
	}
	startCollector()
	allocations, err := produceAllocations(ctx, brokers)
	if err != nil {
		t.Fatal(err)
	}

	load := &faultLoad{malformed: map[string]bool{}}
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan error, 1)
	go func() { loadDone <- load.run(loadCtx, t, brokers, 50*time.Millisecond) }() // ~22k samples/s
	defer stopLoad()

	// Five SIGKILLs under load, 1 to 2 s apart, each followed by a restart.
	for i := range 5 {
		time.Sleep(time.Second + time.Duration(i)*250*time.Millisecond)
		col().Kill()
		startCollector()
	}

	// ClickHouse down for a minute under load: the collector keeps running, commits nothing
	// and its memory stays bounded; once ClickHouse is back it catches up.
	time.Sleep(2 * time.Second)
	conn := db.Conn
	rssBefore := rssBytes(t, col().Pid())
	producedBefore := load.produced()
	if err := ch.Stop(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	time.Sleep(3 * time.Second) // the flush in flight fails
	committedDown := committed(t, ctx, brokers, partitions)
	var rssMax, rssAt20 uint64
	for time.Since(down) < faultOutage {
		time.Sleep(2 * time.Second)
		rss := rssBytes(t, col().Pid()) // fails if the collector exited: a zombie has no VmRSS
		rssMax = max(rssMax, rss)
		if rssAt20 == 0 && time.Since(down) >= 20*time.Second {
			rssAt20 = rss
		}
		if c := committed(t, ctx, brokers, partitions); c != committedDown {
			t.Fatalf("offsets committed while ClickHouse was down: %d, then %d %s into the outage\n%s",
				committedDown, c, time.Since(down).Round(time.Second), logs())
		}
	}
	rssEnd := rssBytes(t, col().Pid())
	producedDown := load.produced() - producedBefore
	t.Logf("ClickHouse down %s: %d samples produced meanwhile; collector RSS %d MiB before, %d MiB at 20 s, %d MiB at the end, %d MiB at most",
		time.Since(down).Round(time.Second), producedDown, rssBefore>>20, rssAt20>>20, rssEnd>>20, rssMax>>20)
	if producedDown < uint64(faultOutage.Seconds())*5000 {
		t.Errorf("only %d samples produced while ClickHouse was down: the outage was not under load", producedDown)
	}
	if rssMax > maxOutageRSS {
		t.Errorf("collector RSS reached %d MiB while ClickHouse was down (bound %d MiB)", rssMax>>20, maxOutageRSS>>20)
	}
	if rssEnd > rssAt20+maxOutageGrowth {
		t.Errorf("collector RSS grew from %d MiB to %d MiB over the outage's last 40 s (bound %d MiB)", rssAt20>>20, rssEnd>>20, maxOutageGrowth>>20)
	}
	if err := ch.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	restarted, backlog := time.Now(), load.produced()
	waitStored(t, ctx, conn, backlog, false, time.Minute, logs)
	t.Logf("caught up with the %d samples produced until ClickHouse came back in %s", backlog, time.Since(restarted).Round(100*time.Millisecond))
	if c := committed(t, ctx, brokers, partitions); c <= committedDown {
		t.Errorf("no offsets committed after ClickHouse came back: %d, then %d", committedDown, c)
	}

	// Kafka broker restart.
	if err := kfk.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	stopLoad()
	if err := <-loadDone; err != nil {
		t.Fatal(err)
	}

	want := load.samples
	t.Logf("produced %d samples (%d with sm_active unavailable) in %d seconds × %d nodes, %d malformed messages",
		want, load.unmeasured, load.seconds, faultNodes, len(load.malformed))
	waitStored(t, ctx, conn, want, true, time.Minute, logs)
	if got := queryUint(t, ctx, conn, "SELECT uniqExact(allocation_id) FROM allocations"); got != uint64(allocations) {
		t.Errorf("stored %d allocations, produced %d", got, allocations)
	}
	// Let the last flush's rollups and commit finish, then stop cleanly.
	time.Sleep(time.Second)
	if err := col().Stop(); err != nil {
		t.Errorf("collector did not stop cleanly: %v\n%s", err, logs())
	}

	// Raw: sm_active_unavailable arrived with every sample.
	if got := queryUint(t, ctx, conn, `SELECT count() FROM (SELECT node, instance_id, ts_ns FROM samples
        WHERE sm_active_unavailable = 1 GROUP BY node, instance_id, ts_ns)`); got != load.unmeasured {
		t.Errorf("%d distinct samples stored with sm_active_unavailable, produced %d", got, load.unmeasured)
	}
	// Rollups: every sample counted exactly once, although batches were inserted again.
	measured := want - load.unmeasured
	for _, table := range []string{"samples_1s", "samples_1m"} {
		var samples, active, waits uint64
		var smSum float64
		err := conn.QueryRow(ctx, `SELECT sum(samples), sum(active_samples), sum(sm_active_sum), sum(arraySum(wait_count))
            FROM (SELECT samples, active_samples, sm_active_sum, wait_count FROM `+table+`
                  ORDER BY samples DESC LIMIT 1 BY node, instance_id, time)`).Scan(&samples, &active, &smSum, &waits)
		if err != nil {
			t.Fatal(err)
		}
		if samples != want || active != measured || waits != load.waits || math.Abs(smSum-load.smSum) > 1e-6*load.smSum {
			t.Errorf("%s: %d samples (%d measured), sm_active sum %.3f, %d waits; produced %d (%d), %.3f, %d",
				table, samples, active, smSum, waits, want, measured, load.smSum, load.waits)
		}
	}
	// The kills did interrupt batches: more rows were inserted than produced (replays), and
	// yet every count above is exact.
	inserted := insertedRows(t, runs)
	t.Logf("inserted %d sample rows for %d produced samples over %d collector runs (%d replayed)", inserted, want, len(runs), inserted-want)
	if inserted < want {
		t.Errorf("the collectors' logs show %d inserted sample rows, fewer than the %d stored", inserted, want)
	}

	// The report's totals are what was produced, from the raw samples and from each rollup.
	// The window ends on a whole minute at least 10 s after the last sample, so that every
	// allocation has unmetered time (a sample counted twice would eat into it) and the
	// minute rollup covers the window exactly.
	from := time.Unix(0, int64(faultBase)).UTC()
	windowSec := (load.seconds + 10 + 59) / 60 * 60
	to := from.Add(time.Duration(windowSec) * time.Second)
	wantRows := load.expectedReport(float64(windowSec))
	for _, source := range []string{"raw", "rollup-1s", "rollup-1m"} {
		r := apptest.Run(t, ctx, "report", "--clickhouse.dsn", dsn, "--pricebook", faultPriceBook,
			"--attribution.samples", source, "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339))
		if r.Code != 0 {
			t.Errorf("report from %s exited %d\n%s", source, r.Code, r.Stderr)
			continue
		}
		t.Logf("report from %s in %s:\n%s", source, r.Took.Round(time.Millisecond), r.Stdout)
		for _, d := range compareFaultReport(r.Stdout, wantRows) {
			t.Errorf("report from %s: %s", source, d)
		}
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
	t.Logf("test took %s", time.Since(began).Round(time.Second))
}

// waitStored waits until want distinct samples are stored (at least want, unless exact);
// more than want when exact, or not within limit, fails the test.
func waitStored(t *testing.T, ctx context.Context, conn driver.Conn, want uint64, exact bool, stall time.Duration, logs func() string) {
	t.Helper()
	// What is checked is that nothing is lost, not how fast a shared CI machine catches up:
	// the wait goes on while the count grows and fails once it has stood still for stall
	// (or after a generous ceiling, so that a trickle cannot hold the suite).
	start, ceiling := time.Now(), 4*stall
	var last uint64
	lastGrew := start
	for {
		got := queryUint(t, ctx, conn, "SELECT count() FROM (SELECT DISTINCT node, instance_id, ts_ns FROM samples)")
		if got != last {
			last, lastGrew = got, time.Now()
		}
		switch {
		case got == want || got > want && !exact:
			return
		case got > want:
			t.Fatalf("stored %d distinct samples, more than the %d produced\n%s", got, want, logs())
		case time.Since(lastGrew) > stall || time.Since(start) > ceiling:
			t.Fatalf("stored %d distinct samples after %s (none more for %s), want %d\n%s",
				got, time.Since(start).Round(time.Second), time.Since(lastGrew).Round(time.Second), want, logs())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// faultRow is what a report row must say: seconds, money and efficiency.
type faultRow struct {
	tier                                                string
	allocated, unmetered                                float64
	listCost, cost, wasteCost, overheadCost, efficiency float64
}

// expectedReport is the report of [faultBase, faultBase + window s) by the README's
// definitions, from what was produced: every allocation is billed the whole window and
// metered for the produced seconds; efficiency is the mean activity of its samples (for a
// vGPU over its share of the GPU net of the switch overhead); tenants' rows sum their
// allocations, the efficiency weighted by metered time (equal here). The unallocated row's
// list cost is the capacity (two GPUs a node) less the tenants'.
func (l *faultLoad) expectedReport(window float64) map[string]faultRow {
	metered := float64(l.seconds)
	perInstance := metered * faultTicks // samples of an instance on one node
	rows := map[string]faultRow{}
	var listTotal float64
	for _, tn := range faultTenants {
		row := faultRow{tier: tn.tier}
		for _, i := range tn.instances {
			in := faultLayout[i]
			var fraction, overhead, efficiency float64
			switch in.kind {
			case pb.Kind_KIND_MIG:
				fraction = float64(in.slices) / 7
				overhead = min(1, max(0, 1-(float64(in.sms)/faultGPUSMs)/fraction))
				efficiency = l.smByInstance[i] / perInstance
			default:
				fraction = faultVGPUShare
				overhead = float64(faultSwitchNs) / float64(faultInterval)
				efficiency = l.smByInstance[i] / perInstance / (fraction * (1 - overhead))
			}
			list := faultNodes * faultPrice * fraction * window / 3600
			cost := list * tn.multiplier
			row.allocated += faultNodes * window
			row.unmetered += faultNodes * (window - metered)
			row.listCost += list
			row.cost += cost
			row.wasteCost += cost * (1 - overhead) * (metered / window) * (1 - efficiency)
			row.overheadCost += cost * overhead
			row.efficiency += efficiency / float64(len(tn.instances))
		}
		listTotal += row.listCost
		rows[tn.name] = row
	}
	rows["__unallocated__"] = faultRow{listCost: faultNodes*2*faultPrice*window/3600 - listTotal}
	return rows
}

// compareFaultReport returns every difference between a CSV report and want, beyond the
// rounding of its printed decimals.
func compareFaultReport(report string, want map[string]faultRow) []string {
	rows, err := csv.NewReader(strings.NewReader(report)).ReadAll()
	if err != nil {
		return []string{fmt.Sprintf("not CSV: %v\n%s", err, report)}
	}
	if len(rows) != len(want)+1 {
		return []string{fmt.Sprintf("%d rows, want %d:\n%s", len(rows)-1, len(want), report)}
	}
	col := map[string]int{}
	for j, name := range rows[0] {
		col[name] = j
	}
	var diffs []string
	for _, r := range rows[1:] {
		if len(r) != len(rows[0]) {
			return []string{fmt.Sprintf("row %v has %d fields, the header %d", r, len(r), len(rows[0]))}
		}
		tenant := r[col["tenant"]]
		w, ok := want[tenant]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("unexpected row %v", r))
			continue
		}
		check := func(name string, want, half float64) {
			got, err := strconv.ParseFloat(r[col[name]], 64)
			if err != nil || math.Abs(got-want) > half+1e-9*math.Abs(want) {
				diffs = append(diffs, fmt.Sprintf("%s %s: %q, want %.7f", tenant, name, r[col[name]], want))
			}
		}
		check("list_cost", w.listCost, 5e-7)
		if tenant == "__unallocated__" {
			continue
		}
		if got := r[col["tier"]]; got != w.tier {
			diffs = append(diffs, fmt.Sprintf("%s tier %q, want %q", tenant, got, w.tier))
		}
		check("allocated_seconds", w.allocated, 5e-4)
		check("unmetered_seconds", w.unmetered, 5e-4)
		check("cost", w.cost, 5e-7)
		check("waste_cost", w.wasteCost, 5e-7)
		check("overhead_cost", w.overheadCost, 5e-7)
		check("efficiency", w.efficiency, 5e-5)
		check("cold_start_max_s", 0, 5e-4) // attached from the first sample, at requested_at
		check("cold_start_breaches", 0, 0)
	}
	return diffs
}

// insertedRows sums the rows of the collectors' "inserted ... table=samples rows=N" debug lines.
func insertedRows(t *testing.T, runs []*apptest.Process) uint64 {
	t.Helper()
	var total uint64
	for _, p := range runs {
		for _, line := range strings.Split(p.Log(), "\n") {
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
