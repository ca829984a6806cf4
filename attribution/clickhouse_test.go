package attribution_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// The tests share the binary's ClickHouse 18.16 (chtest.NewDatabase); TestMain stops it.
func TestMain(m *testing.M) { localtest.Main(m) }

// newDatabase returns a connection to a fresh database with slicemeter's schema.
func newDatabase(t testing.TB) driver.Conn {
	t.Helper()
	return chtest.NewDatabase(t, nil)
}

// newDatabaseLogged is newDatabase with the driver logging to logger (nil: nowhere).
func newDatabaseLogged(t testing.TB, logger *slog.Logger) driver.Conn {
	t.Helper()
	return chtest.NewDatabase(t, logger)
}

// insertSamples writes samples of one node as the collector does, column by column.
func insertSamples(t *testing.T, conn driver.Conn, node string, samples []*pb.Sample) {
	t.Helper()
	chtest.InsertSamples(t, conn, node, samples)
}

// allocationRow is one row of the allocations table (chtest.AllocationRow).
type allocationRow struct {
	id, tenant, tier, node, instance string
	requested, started, ended        time.Time // ended zero: still running
	version                          uint64
	deleted                          bool
}

func insertAllocations(t *testing.T, conn driver.Conn, rows []allocationRow) {
	t.Helper()
	out := make([]chtest.AllocationRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, chtest.AllocationRow{ID: r.id, Tenant: r.tenant, Tier: r.tier, Node: r.node, Instance: r.instance,
			Requested: r.requested, Started: r.started, Ended: r.ended, Version: r.version, Deleted: r.deleted})
	}
	chtest.InsertAllocations(t, conn, out)
}
