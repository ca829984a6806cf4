// Package chtest is what attribution's tests that need ClickHouse share: a fresh database per
// test on the test binary's ClickHouse 18.16 (from localtest), and the writers of samples,
// rollups and allocations as the collector and the intakes write them.
package chtest

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/exporter/sim"
	"github.com/slicemeter/slicemeter/schemas/energy"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// NewDatabase is a connection to a fresh database of t with slicemeter's schema, on the test
// binary's shared ClickHouse (localtest: its TestMain calls localtest.Main), the driver
// logging to logger (nil: nowhere); the schema is applied through another connection.
func NewDatabase(t testing.TB, logger *slog.Logger) driver.Conn {
	t.Helper()
	return localtest.Database(t, localtest.DatabaseOptions{Logger: logger}).Conn
}

// InsertSamples writes samples of one node as the collector does, column by column.
func InsertSamples(t testing.TB, conn driver.Conn, node string, samples []*pb.Sample) {
	t.Helper()
	ctx := context.Background()
	batch, err := conn.PrepareBatch(ctx, tables.Insert(tables.Samples, tables.SampleColumns))
	if err != nil {
		t.Fatal(err)
	}
	var (
		times                                                    []time.Time
		ts, intervals, memUsed, memTotal, gpuMem, run, switching []uint64
		nodes, uuids, models, kinds, instances, profiles         []string
		gpuIndex, slices, sms, gpuSMs, replicas                  []uint32
		attached, unavailable, estimated                         []uint8
		smActive, power, joules                                  []float64
		counter                                                  []uint64
		waits                                                    [][]uint64
	)
	for _, s := range samples {
		times = append(times, time.Unix(int64(s.TsNs/1e9), 0).UTC())
		ts = append(ts, s.TsNs)
		intervals = append(intervals, s.IntervalNs)
		nodes = append(nodes, node)
		uuids = append(uuids, s.GpuUuid)
		gpuIndex = append(gpuIndex, s.GpuIndex)
		models = append(models, s.Model)
		kinds = append(kinds, s.Kind.Label())
		instances = append(instances, s.InstanceId)
		profiles = append(profiles, s.Profile)
		var a uint8
		if s.Attached {
			a = 1
		}
		attached = append(attached, a)
		var u uint8
		if s.GetSmActiveUnavailable() {
			u = 1
		}
		unavailable = append(unavailable, u)
		smActive = append(smActive, s.SmActive)
		memUsed = append(memUsed, s.MemUsedBytes)
		memTotal = append(memTotal, s.MemTotalBytes)
		power = append(power, s.PowerWatts)
		slices = append(slices, s.ComputeSlices)
		sms = append(sms, s.SmCount)
		gpuSMs = append(gpuSMs, s.GpuSmCount)
		gpuMem = append(gpuMem, s.GpuMemTotalBytes)
		run = append(run, s.GetVgpu().GetRunNs())
		switching = append(switching, s.GetVgpu().GetSwitchNs())
		w := s.GetVgpu().GetWaitsNs()
		if w == nil {
			w = []uint64{}
		}
		waits = append(waits, w)
		replicas = append(replicas, s.GetShareReplicas())
		j, est := energy.Of(s)
		var e uint8
		if est {
			e = 1
		}
		joules, estimated = append(joules, j), append(estimated, e)
		counter = append(counter, s.GetEnergyMj())
	}
	columns := []any{times, ts, intervals, nodes, uuids, gpuIndex, models, kinds, instances, profiles, attached,
		smActive, memUsed, memTotal, power, slices, sms, gpuSMs, gpuMem, run, switching, waits, unavailable, replicas,
		counter, joules, estimated}
	for i, c := range columns {
		if err := batch.Column(i).Append(c); err != nil {
			t.Fatalf("append column %d: %v", i, err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
}

// AllocationRow is one row of the allocations table.
type AllocationRow struct {
	ID, Tenant, Tier, Node, Instance string
	Requested, Started, Ended        time.Time // Ended zero: still running
	Version                          uint64
	Deleted                          bool
}

func ns(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// InsertAllocations writes the rows, received now.
func InsertAllocations(t testing.TB, conn driver.Conn, rows []AllocationRow) {
	t.Helper()
	ctx := context.Background()
	batch, err := conn.PrepareBatch(ctx, tables.Insert(tables.Allocations, tables.AllocationColumns))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		var deleted uint8
		if r.Deleted {
			deleted = 1
		}
		err := batch.Append(r.ID, r.Tenant, r.Tier, r.Node, r.Instance, ns(r.Requested), ns(r.Started), ns(r.Ended),
			r.Version, deleted, time.Now().UTC().Truncate(time.Second))
		if err != nil {
			t.Fatalf("append allocation %s: %v", r.ID, err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(fmt.Errorf("insert allocations: %w", err))
	}
}

// Simulate reads every tick of the scenario and hands over the samples node by node, in
// batches of about a minute of ticks.
func Simulate(t testing.TB, sc *scenario.Scenario, write func(node string, samples []*pb.Sample)) {
	t.Helper()
	src, err := sim.New(sc, "", sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pending := map[string][]*pb.Sample{}
	flush := func() {
		for node, samples := range pending {
			write(node, samples)
		}
		clear(pending)
	}
	for n := 0; ; n++ {
		d := time.Duration(n) * sc.Interval
		if d >= sc.Duration {
			break
		}
		out, err := src.Read(context.Background(), sc.Start.Add(d), sc.Interval)
		if err != nil {
			t.Fatal(err)
		}
		for _, ns := range out {
			pending[ns.Node] = append(pending[ns.Node], ns.Samples...)
		}
		if n%600 == 599 {
			flush()
		}
	}
	flush()
}

// InsertScenario writes every sample of the scenario (Simulate) and its allocations.
func InsertScenario(t testing.TB, conn driver.Conn, sc *scenario.Scenario) {
	t.Helper()
	Simulate(t, sc, func(node string, samples []*pb.Sample) { InsertSamples(t, conn, node, samples) })
	InsertAllocations(t, conn, ScenarioAllocations(sc))
}

// ScenarioAllocations are the scenario's allocations as the allocations table holds them.
func ScenarioAllocations(sc *scenario.Scenario) []AllocationRow {
	var rows []AllocationRow
	for _, tn := range sc.Tenants {
		for i, a := range tn.Allocations {
			rows = append(rows, AllocationRow{
				ID: fmt.Sprintf("%s-%d", tn.Name, i), Tenant: tn.Name, Tier: tn.Tier,
				Node: a.Target.Node, Instance: a.Target.Instance,
				Requested: sc.Start.Add(a.Requested), Started: sc.Start.Add(a.Ready), Ended: sc.Start.Add(a.End),
				Version: 1,
			})
		}
	}
	return rows
}

// RollUp fills samples_1s from the samples and samples_1m from samples_1s as the collector
// does (one complete row per node, instance and second or minute; of the copies of a sample
// the one received last).
func RollUp(t testing.TB, conn driver.Conn) {
	t.Helper()
	err := conn.Exec(context.Background(), tables.RollupSeconds("1", "1"))
	if err != nil {
		t.Fatalf("roll the samples up into samples_1s: %v", err)
	}
	err = conn.Exec(context.Background(), tables.RollupMinutes("1"))
	if err != nil {
		t.Fatalf("roll samples_1s up into samples_1m: %v", err)
	}
}
