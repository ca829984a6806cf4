package attribution_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/deploy/local"
	"github.com/slicemeter/slicemeter/schemas/migrations"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// server is the package's ClickHouse 18.16, started by the first test that needs one and
// stopped by TestMain.
var server struct {
	once sync.Once
	ch   *local.ClickHouse
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if server.ch != nil {
		server.ch.Close()
	}
	os.Exit(code)
}

// newDatabase returns a connection to a fresh database with slicemeter's schema.
func newDatabase(t testing.TB) driver.Conn {
	t.Helper()
	return newDatabaseLogged(t, nil)
}

// newDatabaseLogged is newDatabase with the driver logging to logger (nil: nowhere); the
// schema is applied through another connection.
func newDatabaseLogged(t testing.TB, logger *slog.Logger) driver.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	server.once.Do(func() { server.ch, server.err = local.StartClickHouse(ctx, local.ClickHouseOptions{}) })
	if server.err != nil {
		t.Fatalf("start ClickHouse (the clickhouse-server package must be installed): %v", server.err)
	}
	db := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "_"))
	if err := server.ch.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	open := func(logger *slog.Logger) driver.Conn {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{server.ch.Addr()}, Auth: clickhouse.Auth{Database: db}, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	if _, err := migrations.Apply(ctx, open(nil)); err != nil {
		t.Fatal(err)
	}
	return open(logger)
}

// insertSamples writes samples of one node as the collector does, column by column.
func insertSamples(t *testing.T, conn driver.Conn, node string, samples []*pb.Sample) {
	t.Helper()
	ctx := context.Background()
	batch, err := conn.PrepareBatch(ctx, `INSERT INTO samples (time, ts_ns, interval_ns, node, gpu_uuid, gpu_index, model, kind,
		instance_id, profile, attached, sm_active, mem_used_bytes, mem_total_bytes, power_watts, compute_slices, sm_count,
		gpu_sm_count, gpu_mem_total_bytes, vgpu_run_ns, vgpu_switch_ns, vgpu_waits_ns, sm_active_unavailable)`)
	if err != nil {
		t.Fatal(err)
	}
	var (
		times                                                    []time.Time
		ts, intervals, memUsed, memTotal, gpuMem, run, switching []uint64
		nodes, uuids, models, kinds, instances, profiles         []string
		gpuIndex, slices, sms, gpuSMs                            []uint32
		attached, unavailable                                    []uint8
		smActive, power                                          []float64
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
	}
	columns := []any{times, ts, intervals, nodes, uuids, gpuIndex, models, kinds, instances, profiles, attached,
		smActive, memUsed, memTotal, power, slices, sms, gpuSMs, gpuMem, run, switching, waits, unavailable}
	for i, c := range columns {
		if err := batch.Column(i).Append(c); err != nil {
			t.Fatalf("append column %d: %v", i, err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
}

// allocationRow is one row of the allocations table.
type allocationRow struct {
	id, tenant, tier, node, instance string
	requested, started, ended        time.Time // ended zero: still running
	version                          uint64
	deleted                          bool
}

func ns(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func insertAllocations(t *testing.T, conn driver.Conn, rows []allocationRow) {
	t.Helper()
	ctx := context.Background()
	batch, err := conn.PrepareBatch(ctx, `INSERT INTO allocations (allocation_id, tenant, tier, node, instance_id,
		requested_ns, started_ns, ended_ns, version, deleted, received)`)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		var deleted uint8
		if r.deleted {
			deleted = 1
		}
		err := batch.Append(r.id, r.tenant, r.tier, r.node, r.instance, ns(r.requested), ns(r.started), ns(r.ended),
			r.version, deleted, time.Now().UTC().Truncate(time.Second))
		if err != nil {
			t.Fatalf("append allocation %s: %v", r.id, err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(fmt.Errorf("insert allocations: %w", err))
	}
}
