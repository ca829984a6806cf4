package attribution_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/service"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/schemas/hardware"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestPropertyRandomScenarios generates random fleets (MIG layouts, whole GPUs, time-sliced
// vGPUs, vGPUs alone with work), allocations starting and ending inside minutes, outages and
// loads, runs them through the simulator into ClickHouse with clock steps (extra samples
// overlapping their neighbours) and stale duplicates (same key, other values and interval,
// received first), and checks every path — raw samples, samples_1s, samples_1m (which reads
// partial minutes from samples_1s) and the minutes the attribution service stored — against
// each other (1e-6 on money and seconds, 1e-4 on ratios) and against the ground truth, computed
// here tick by tick from the scenario and the README's definitions within the README's
// tolerances (those of the acceptance check), on whole-minute windows: the whole scenario and,
// with SLICEMETER_PROPERTY_FULL=1 or for the first seed, every whole-minute sub-window; for the
// other seeds every whole-minute start with lengths of 1 and 2 minutes and to the end (a full
// sweep is 55 windows × 4 paths a seed). More seeds: SLICEMETER_PROPERTY_SEEDS=n.
func TestPropertyRandomScenarios(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("simulates random fleets into ClickHouse")
	}
	seeds := 8
	if n, err := strconv.Atoi(os.Getenv("SLICEMETER_PROPERTY_SEEDS")); err == nil && n > 0 {
		seeds = n
	}
	full := os.Getenv("SLICEMETER_PROPERTY_FULL") == "1"
	for i := range 2 * seeds {
		// Times on multiples of 5 s or of whole minutes.
		seed, grain := i/2, 5*time.Second
		if i%2 == 1 {
			grain = time.Minute
		}
		t.Run(fmt.Sprintf("seed-%d-%s", seed, grain), func(t *testing.T) {
			t.Parallel()
			text := randomScenario(rand.New(rand.NewPCG(uint64(seed), 5)), grain)
			sc, err := scenario.Parse(fmt.Sprintf("seed-%d.yaml", seed), []byte(text))
			if err != nil {
				t.Fatalf("generated scenario: %v\n%s", err, text)
			}
			ctx := context.Background()
			conn := newDatabase(t)
			insertStaleCopies(t, conn, sc, rand.New(rand.NewPCG(uint64(seed), 7)))
			insertWithClockSteps(t, conn, sc, rand.New(rand.NewPCG(uint64(seed), 11)))
			chtest.InsertAllocations(t, conn, chtest.ScenarioAllocations(sc))
			chtest.RollUp(t, conn)
			book := sc.Book
			runner := service.NewRunner(conn, book, service.Passes{Backfill: sc.Duration, MaxMinutes: int(sc.Duration / time.Minute),
				Samples: store.RawSamples}, nil, slog.New(slog.DiscardHandler))
			runner.SetClock(func() time.Time { return sc.End() })
			if _, err := runner.Once(ctx); err != nil {
				t.Fatal(err)
			}
			paths := reportPaths(ctx, conn, book)
			for _, w := range propertyWindows(int(sc.Duration/time.Minute), full || seed == 0) {
				from, to := time.Duration(w[0])*time.Minute, time.Duration(w[1])*time.Minute
				whole := from == 0 && to == sc.Duration
				want := groundTruth(sc, from, to)
				var raw report.Report
				for _, p := range paths {
					rep, err := p.compute(sc.Start.Add(from), sc.Start.Add(to))
					if err != nil {
						t.Fatalf("%s [%s, %s): %v", p.name, from, to, err)
					}
					if errs := billing.CheckInvariants(rep); len(errs) > 0 {
						t.Errorf("%s [%s, %s): invariants: %v", p.name, from, to, errs)
					}
					if p.name == "raw" {
						raw = rep
					} else if d, _, _ := samePaths(raw, rep); len(d) > 0 {
						t.Errorf("%s [%s, %s) disagrees with raw samples: %s", p.name, from, to, strings.Join(d, "; "))
					}
					got := map[string]report.Row{}
					for _, r := range rep.Tenants {
						got[r.Tenant] = r
					}
					if len(got) != len(want) {
						t.Errorf("%s [%s, %s): tenants %d, want %d", p.name, from, to, len(got), len(want))
					}
					for name, tw := range want {
						if d := compareRow(got[name], tw, sc.Interval, whole); len(d) > 0 {
							t.Errorf("%s [%s, %s): tenant %s: %s", p.name, from, to, name, strings.Join(d, "; "))
						}
					}
				}
			}
			if t.Failed() {
				t.Logf("scenario:\n%s", text)
			}
		})
	}
}

// propertyWindows are the whole-minute windows [i, j) of a scenario of minutes that the
// property test checks, the whole one first: every one (all), or every start with lengths 1
// and 2 and to the end.
func propertyWindows(minutes int, all bool) [][2]int {
	out := [][2]int{{0, minutes}}
	for i := range minutes {
		for j := i + 1; j <= minutes; j++ {
			if (i == 0 && j == minutes) || (!all && j-i > 2 && j != minutes) {
				continue
			}
			out = append(out, [2]int{i, j})
		}
	}
	return out
}

// insertStaleCopies writes, before the scenario's own samples, copies of a random part of them
// with another sm_active and another interval: duplicates of the same (node, instance_id,
// ts_ns) with conflicting values. The one received last wins in every table and path, so the
// ground truth stands.
func insertStaleCopies(t *testing.T, conn driver.Conn, sc *scenario.Scenario, r *rand.Rand) {
	t.Helper()
	chtest.Simulate(t, sc, func(node string, samples []*pb.Sample) {
		var stale []*pb.Sample
		for _, s := range samples {
			if r.IntN(4) == 0 {
				c := proto.Clone(s).(*pb.Sample)
				c.SmActive = 1 - c.SmActive
				c.IntervalNs = []uint64{c.IntervalNs / 2, c.IntervalNs * 2, c.IntervalNs * 3}[r.IntN(3)]
				stale = append(stale, c)
			}
		}
		if len(stale) > 0 {
			chtest.InsertSamples(t, conn, node, stale)
		}
	})
}

// insertWithClockSteps writes the scenario's samples and, after a random fifth of them, the
// sample of an exporter whose clock stepped back: a copy taken again δ (10 ms to 90 % of the
// interval) earlier, overlapping the sample before it and this one. Only where the sample
// before it is there (no outage, the same attachment, the same load), so that the union of the
// intervals, the cold start and the time-weighted means are the scenario's; its waits were
// reported already (none). Summed instead of united, those intervals would meter up to twice
// the time.
func insertWithClockSteps(t *testing.T, conn driver.Conn, sc *scenario.Scenario, r *rand.Rand) {
	t.Helper()
	type key struct{ node, instance string }
	prev := map[key]*pb.Sample{}
	chtest.Simulate(t, sc, func(node string, samples []*pb.Sample) {
		out := samples
		for _, s := range samples {
			k := key{node, s.InstanceId}
			p := prev[k]
			prev[k] = s
			if p == nil || p.TsNs+p.IntervalNs != s.TsNs || p.Attached != s.Attached || !sameLoad(p, s) || r.IntN(5) != 0 {
				continue
			}
			c := proto.Clone(s).(*pb.Sample)
			step := time.Duration(10+r.Int64N(int64(time.Duration(s.IntervalNs)*9/10/time.Millisecond)-10)) * time.Millisecond
			c.TsNs -= uint64(step)
			if c.Vgpu != nil {
				c.Vgpu.WaitsNs = nil
			}
			out = append(out, c)
		}
		chtest.InsertSamples(t, conn, node, out)
	})
}

// sameLoad: two samples of one instance report the same activity, a vGPU's within its
// scheduler's phase noise (a slice of the interval).
func sameLoad(a, b *pb.Sample) bool {
	if a.Kind == pb.Kind_KIND_VGPU {
		return math.Abs(a.SmActive-b.SmActive) <= 0.02
	}
	return a.SmActive == b.SmActive
}

// randomScenario writes a scenario of one or two nodes over ten minutes; every time is a
// multiple of grain (itself a multiple of the sampling interval).
func randomScenario(r *rand.Rand, grain time.Duration) string {
	const duration = 10 * time.Minute
	at := func(lo, hi time.Duration) time.Duration { // a multiple of grain in [lo, hi]
		n := int64((hi - lo) / grain)
		return lo + time.Duration(r.Int64N(n+1))*grain
	}
	layouts := [][]string{{"1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"}, {"3g.20gb", "3g.20gb"}, {"7g.40gb"}, {"2g.10gb", "2g.10gb", "3g.20gb"}, {"4g.20gb", "3g.20gb"}}
	var b strings.Builder
	b.WriteString("version: 1\nname: random\nstart: \"2026-02-01T00:00:00Z\"\nduration: 10m\ninterval: 500ms\ncurrency: EUR\n")
	b.WriteString("prices: {A100-SXM4-40GB: 1.70, H100-SXM5-80GB: 2.90}\ntiers: {pro: 1.0, budget: 0.6}\nsla: {cold_start: {pro: 20s, budget: 45s}}\nnodes:\n")
	type slot struct{ target, kind string }
	var slots []slot
	for n := range 1 + r.IntN(2) {
		node := fmt.Sprintf("node-%d", n)
		fmt.Fprintf(&b, "  - name: %s\n", node)
		if r.IntN(2) == 0 {
			from := at(0, duration-time.Minute)
			fmt.Fprintf(&b, "    outages: [{from: %s, to: %s}]\n", from, from+at(grain, time.Minute))
		}
		b.WriteString("    gpus:\n")
		for g := range 1 + r.IntN(3) {
			switch r.IntN(4) {
			case 0:
				layout := layouts[r.IntN(len(layouts))]
				fmt.Fprintf(&b, "      - {model: A100-SXM4-40GB, mig: [%s]}\n", strings.Join(layout, ", "))
				for i := range layout {
					slots = append(slots, slot{fmt.Sprintf("%s/gpu%d/mig%d", node, g, i), "mig"})
				}
			case 1:
				b.WriteString("      - {model: H100-SXM5-80GB}\n")
				slots = append(slots, slot{fmt.Sprintf("%s/gpu%d", node, g), "gpu"})
			case 2:
				// Replicas (time-slicing, MPS): 3 of them, whose memory does not divide evenly.
				b.WriteString("      - {model: H100-SXM5-80GB, share: {mode: time_slicing, replicas: 3}}\n")
				for i := range 3 {
					slots = append(slots, slot{fmt.Sprintf("%s/gpu%d/share%d", node, g, i), "share"})
				}
			default:
				// Time slices that do or do not divide the sampling interval: the scheduler's
				// phase then differs from tick to tick.
				ts := []string{"2ms", "3ms", "7ms"}[r.IntN(3)]
				fmt.Fprintf(&b, "      - {model: H100-SXM5-80GB, vgpu: {profile: H100-20C, count: 4, scheduler: equal_share, timeslice: %s, switch: 20us}}\n", ts)
				for i := range 4 {
					slots = append(slots, slot{fmt.Sprintf("%s/gpu%d/vgpu%d", node, g, i), "vgpu"})
				}
			}
		}
	}
	tenants := map[string][]string{}
	tiers := map[string]string{"acme": "pro", "beta": "budget", "gamma": "pro"}
	for _, s := range slots {
		if r.IntN(10) < 3 {
			continue // unallocated
		}
		name := []string{"acme", "beta", "gamma"}[r.IntN(3)]
		requested := at(0, duration-2*time.Minute)
		ready := at(requested, requested+time.Minute)
		end := at(ready+grain, duration)
		var workload string
		switch {
		case s.kind == "vgpu":
			workload = fmt.Sprintf("{sm: %d, mem: 0.5}", r.IntN(2))
		case r.IntN(2) == 0:
			workload = fmt.Sprintf("{sm: %.2f, mem: 0.4}", 0.05+0.9*r.Float64())
		default:
			workload = fmt.Sprintf("{steps: [[0s, %.2f], [%s, %.2f]], mem: 0.4}", r.Float64(), at(grain, duration), r.Float64())
		}
		tenants[name] = append(tenants[name], fmt.Sprintf("      - {target: %s, requested: %s, ready: %s, end: %s, workload: %s}\n", s.target, requested, ready, end, workload))
	}
	if len(tenants) > 0 {
		b.WriteString("tenants:\n")
	}
	for _, name := range []string{"acme", "beta", "gamma"} {
		if len(tenants[name]) == 0 {
			continue
		}
		fmt.Fprintf(&b, "  - name: %s\n    tier: %s\n    allocations:\n%s", name, tiers[name], strings.Join(tenants[name], ""))
	}
	return b.String()
}

// truth is the expected row of a tenant, summed from its allocations tick by tick.
type truth struct {
	billed, metered                   time.Duration
	list, cost, waste, overhead, effW float64 // effW: Σ efficiency × metered seconds
	waits                             map[time.Duration]float64
	sliced, whole                     bool
	coldMax                           *time.Duration
	breaches                          int
}

// groundTruth applies the README's definitions to the scenario's window [from, to) (offsets from
// its start, whole minutes), tick by tick: samples at
// start + n·interval, none during an outage; a vGPU scheduler round-robin over the busy vGPUs
// (each waits (k−1)·timeslice + k·switch, the switch share of the GPU is switch/(timeslice +
// switch) while k ≥ 2 are busy; a vGPU alone runs without switches: waits 0, no switch share).
func groundTruth(sc *scenario.Scenario, from, to time.Duration) map[string]*truth {
	out := map[string]*truth{}
	type gpuKey struct {
		node string
		gpu  int
	}
	busy := func(key gpuKey, tick time.Duration) int { // busy vGPUs of a GPU at a tick
		k := 0
		for _, tn := range sc.Tenants {
			for _, a := range tn.Allocations {
				if a.Target.Kind == "vgpu" && a.Target.Node == key.node && a.Target.GPU == key.gpu &&
					tick >= a.Ready && tick < a.End && a.Workload.SMAt(tick) >= 1 {
					k++
				}
			}
		}
		return k
	}
	nodes := map[string]scenario.Node{}
	for _, n := range sc.Nodes {
		nodes[n.Name] = n
	}
	down := func(node string, tick time.Duration) bool {
		for _, o := range nodes[node].Outages {
			if tick >= o.From && tick < o.To {
				return true
			}
		}
		return false
	}
	for _, tn := range sc.Tenants {
		for _, a := range tn.Allocations {
			lo, hi := max(a.Ready, from), min(a.End, to) // the billed time in the window
			if lo >= hi {
				continue
			}
			tr := out[tn.Name]
			if tr == nil {
				tr = &truth{waits: map[time.Duration]float64{}}
				out[tn.Name] = tr
			}
			g := nodes[a.Target.Node].GPUs[a.Target.GPU]
			model, _ := hardware.Lookup(g.Model)
			fraction, o := 1.0, 0.0
			var ts, sw time.Duration
			switch a.Target.Kind {
			case "mig":
				p := model.MIG[g.MIG[a.Target.Index]]
				fraction = float64(p.ComputeSlices) / 7
				o = 1 - (float64(p.SMs)/float64(model.SMs))/fraction
				tr.whole = true
			case "vgpu":
				fb, _ := hardware.VGPUFramebuffer(g.VGPU.Profile)
				fraction = float64(fb) / float64(model.MemoryBytes)
				ts, sw = g.VGPU.Timeslice, g.VGPU.Switch
				tr.sliced = true
			case "share":
				fraction = 1 / float64(g.Share.Replicas)
				tr.sliced = true
			default:
				tr.whole = true
			}
			billed := hi - lo
			list := sc.Book.Prices[g.Model] * fraction * billed.Seconds() / 3600
			cost := list * sc.Book.Tiers[tn.Tier]
			var metered time.Duration
			var effSum, oSum float64 // Σ per tick
			// vGPU: per UTC minute of the tick, Σ share·interval, Σ fraction·(1 − o_tick)·interval
			// and the measured time: the efficiency is the minutes' clipped ratio of sums.
			type minuteSums struct{ num, den, active float64 }
			minutes := map[int64]*minuteSums{}
			for tick := lo; tick < hi; tick += sc.Interval {
				if down(a.Target.Node, tick) {
					continue
				}
				metered += sc.Interval
				sm := a.Workload.SMAt(tick)
				if a.Target.Kind == "share" {
					// Per allocation-minute as a vGPU, without switches: min(1, Σ sm / Σ fraction).
					ms := minutes[sc.Start.Add(tick).Unix()/60]
					if ms == nil {
						ms = &minuteSums{}
						minutes[sc.Start.Add(tick).Unix()/60] = ms
					}
					ms.num, ms.den, ms.active = ms.num+sm, ms.den+fraction, ms.active+1
					continue
				}
				if a.Target.Kind != "vgpu" {
					effSum += sm
					continue
				}
				k := busy(gpuKey{a.Target.Node, a.Target.GPU}, tick)
				tsw := sw // the switch after each slice: none for a vGPU alone with work
				if k < 2 {
					tsw = 0
				}
				oTick := 0.0
				if k > 0 {
					oTick = float64(tsw) / float64(ts+tsw)
				}
				oSum += oTick
				ms := minutes[sc.Start.Add(tick).Unix()/60]
				if ms == nil {
					ms = &minuteSums{}
					minutes[sc.Start.Add(tick).Unix()/60] = ms
				}
				ms.den += fraction * (1 - oTick)
				ms.active++
				if sm >= 1 {
					share := float64(ts) / float64(time.Duration(k)*(ts+tsw))
					ms.num += share
					// One wait per round while it has work.
					tr.waits[time.Duration(k-1)*ts+time.Duration(k)*tsw] += float64(sc.Interval) / float64(time.Duration(k)*(ts+tsw))
				}
			}
			for _, ms := range minutes {
				if ms.den > 0 {
					effSum += min(1, ms.num/ms.den) * ms.active
				}
			}
			eff := 0.0
			if metered > 0 {
				eff = effSum / float64(metered/sc.Interval)
				if a.Target.Kind == "vgpu" {
					o = oSum / float64(metered/sc.Interval)
				}
			}
			tr.billed += billed
			tr.metered += metered
			tr.list += list
			tr.cost += cost
			tr.overhead += cost * o
			if billed > 0 && metered > 0 {
				tr.waste += cost * (1 - o) * (metered.Seconds() / billed.Seconds()) * (1 - eff)
			}
			tr.effW += eff * metered.Seconds()
			// Cold start: the first sample at or after ready (attached), outside outages.
			for tick := a.Ready; tick < a.End; tick += sc.Interval {
				if !down(a.Target.Node, tick) {
					d := tick - a.Requested
					if tr.coldMax == nil || d > *tr.coldMax {
						tr.coldMax = &d
					}
					if d > sc.Book.ColdStart[tn.Tier] {
						tr.breaches++
					}
					break
				}
			}
		}
	}
	return out
}

// p99 is the nearest-rank p99 of the weighted waits; ok is false when the 99 % rank falls so
// near a boundary between two wait lengths that tick rounding could move it.
func (tr *truth) p99() (p time.Duration, ok bool) {
	var total float64
	var waits []time.Duration
	for w, n := range tr.waits {
		total += n
		waits = append(waits, w)
	}
	sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
	seen := 0.0
	for _, w := range waits {
		seen += tr.waits[w]
		if seen >= 0.99*total {
			return w, math.Abs(seen-0.99*total) > 0.005*total && math.Abs(seen-tr.waits[w]-0.99*total) > 0.005*total
		}
	}
	return 0, false
}

// compareRow lists the differences beyond the acceptance check's tolerances; the jitter and
// cold starts only for the whole scenario (whole), which holds every allocation's request.
func compareRow(got report.Row, want *truth, interval time.Duration, whole bool) []string {
	var d []string
	near := func(what string, g, w, abs, rel float64) {
		if math.Abs(g-w) > abs && math.Abs(g-w) > rel*math.Abs(w) {
			d = append(d, fmt.Sprintf("%s %.6f, want %.6f", what, g, w))
		}
	}
	near("allocated_seconds", got.Allocated.Seconds(), want.billed.Seconds(), 1e-3, 0)
	near("list_cost", got.ListCost, want.list, 1e-6, 1e-6)
	near("cost", got.Cost, want.cost, 1e-6, 1e-6)
	// ± 0.01 % of the cost on top: a discrete scheduler may give one vGPU a slice more than
	// another within a minute.
	near("waste_cost", got.WasteCost, want.waste, 1e-6+1e-4*want.cost, 0.005)
	near("overhead_cost", got.OverheadCost, want.overhead, 1e-6+1e-4*want.cost, 0.005)
	near("unmetered_seconds", got.Unmetered.Seconds(), (want.billed - want.metered).Seconds(), 2*interval.Seconds(), 0)
	if want.metered > 0 {
		if got.Efficiency == nil {
			d = append(d, "efficiency missing")
		} else {
			near("efficiency", *got.Efficiency, want.effW/want.metered.Seconds(), 1e-4, 0.005)
		}
	}
	if !whole {
		return d
	}
	if p, ok := want.p99(); ok {
		if got.JitterP99 == nil {
			d = append(d, "jitter missing")
		} else {
			near("jitter_p99", got.JitterP99.Seconds(), p.Seconds(), 1e-6, 0.02)
		}
	} else if len(want.waits) == 0 && want.whole && (got.JitterP99 == nil || *got.JitterP99 != 0) {
		d = append(d, fmt.Sprintf("jitter %v, want 0 (not time-sliced, no waits)", got.JitterP99))
	} else if len(want.waits) == 0 && !want.whole && got.JitterP99 != nil {
		d = append(d, fmt.Sprintf("jitter %v, want empty (only time-sliced or shared, no waits)", got.JitterP99))
	}
	switch {
	case want.coldMax == nil && got.ColdStartMax != nil:
		d = append(d, fmt.Sprintf("cold start %s, want none", got.ColdStartMax))
	case want.coldMax != nil && got.ColdStartMax == nil:
		d = append(d, "cold start missing")
	case want.coldMax != nil:
		near("cold_start", got.ColdStartMax.Seconds(), want.coldMax.Seconds(), interval.Seconds(), 0)
	}
	if got.ColdStartBreaches != want.breaches {
		d = append(d, fmt.Sprintf("breaches %d, want %d", got.ColdStartBreaches, want.breaches))
	}
	return d
}

// reportPath is one way to a window's report: raw samples, a rollup or the stored minutes.
type reportPath struct {
	name    string
	compute func(from, to time.Time) (report.Report, error)
}

// reportPaths are the four paths whose reports of a whole-minute window must agree, raw first.
func reportPaths(ctx context.Context, conn store.Querier, book *pricebook.PriceBook) []reportPath {
	// Every path's line items must sum to its tenant rows (lineItemsSum).
	rollup := func(src store.Samples) func(from, to time.Time) (report.Report, error) {
		return func(from, to time.Time) (report.Report, error) {
			return withLineItems(ctx, conn, attribution.Options{From: from, To: to, Samples: src}, book)
		}
	}
	return []reportPath{
		{"raw", rollup(store.RawSamples)},
		{"rollup-1s", rollup(store.SecondRollup)},
		{"rollup-1m", rollup(store.MinuteRollup)},
		{"from-minutes", func(from, to time.Time) (report.Report, error) {
			return withLineItems(ctx, conn, attribution.Options{From: from, To: to, FromMinutes: true}, book)
		}},
	}
}
