package collector

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/schemas/energy"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// sampleColumns buffers sample rows column by column: appending whole columns to a ClickHouse
// batch is much cheaper than appending row by row through reflection.
type sampleColumns struct {
	time             []time.Time
	tsNs             []uint64
	intervalNs       []uint64
	node             []string
	gpuUUID          []string
	gpuIndex         []uint32
	model            []string
	kind             []string
	instanceID       []string
	profile          []string
	attached         []uint8
	smActive         []float64
	memUsedBytes     []uint64
	memTotalBytes    []uint64
	powerWatts       []float64
	computeSlices    []uint32
	smCount          []uint32
	gpuSMCount       []uint32
	gpuMemTotalBytes []uint64
	vgpuRunNs        []uint64
	vgpuSwitchNs     []uint64
	vgpuWaitsNs      [][]uint64
	// smActiveUnavailable is 1 where sm_active was not measured (a MIG instance on a GPU
	// without GPM): rollups leave such samples out of sm_active_sum, active_samples, active_ns.
	smActiveUnavailable []uint8
	shareReplicas       []uint32 // kind share: the GPU's replicas (billed 1/replicas); else 0
	waitsArena          []uint64 // backing array of the vgpuWaitsNs that addWire appends
	// The GPU's energy counter at the tick (mJ, 0: not read), and the tick's energy that
	// schemas/energy computes from the sample, stored so that every reader sums the same
	// joules; energyEstimated is 1 where it is power × interval (no counter to read).
	energyCounterMJ []uint64
	energyJ         []float64
	energyEstimated []uint8
}

// columns returns the slices in the order of tables.SampleColumns, the explicit column list
// ClickHouse 18.16 needs.
func (c *sampleColumns) columns() []any {
	return []any{
		c.time, c.tsNs, c.intervalNs, c.node, c.gpuUUID, c.gpuIndex, c.model, c.kind,
		c.instanceID, c.profile, c.attached, c.smActive, c.memUsedBytes, c.memTotalBytes,
		c.powerWatts, c.computeSlices, c.smCount, c.gpuSMCount, c.gpuMemTotalBytes,
		c.vgpuRunNs, c.vgpuSwitchNs, c.vgpuWaitsNs, c.smActiveUnavailable, c.shareReplicas,
		c.energyCounterMJ, c.energyJ, c.energyEstimated,
	}
}

func (c *sampleColumns) len() int { return len(c.tsNs) }

func boolUint8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// addWire appends one validated sample decoded by d, copying its waits (d reuses its buffers).
func (c *sampleColumns) addWire(node string, s *wireSample, d *sampleDecoder) {
	c.time = append(c.time, time.Unix(int64(s.tsNs/1e9), 0).UTC()) // ts_ns truncated to seconds
	c.tsNs = append(c.tsNs, s.tsNs)
	c.intervalNs = append(c.intervalNs, s.intervalNs)
	c.node = append(c.node, node)
	c.gpuUUID = append(c.gpuUUID, s.gpuUUID)
	c.gpuIndex = append(c.gpuIndex, s.gpuIndex)
	c.model = append(c.model, s.model)
	c.kind = append(c.kind, s.kind.Label())
	c.instanceID = append(c.instanceID, s.instanceID)
	c.profile = append(c.profile, s.profile)
	c.attached = append(c.attached, boolUint8(s.attached))
	c.smActive = append(c.smActive, s.smActive)
	c.memUsedBytes = append(c.memUsedBytes, s.memUsed)
	c.memTotalBytes = append(c.memTotalBytes, s.memTotal)
	c.powerWatts = append(c.powerWatts, s.powerWatts)
	c.computeSlices = append(c.computeSlices, s.computeSlices)
	c.smCount = append(c.smCount, s.smCount)
	c.gpuSMCount = append(c.gpuSMCount, s.gpuSMCount)
	c.gpuMemTotalBytes = append(c.gpuMemTotalBytes, s.gpuMemTotal)
	c.vgpuRunNs = append(c.vgpuRunNs, s.runNs)
	c.vgpuSwitchNs = append(c.vgpuSwitchNs, s.switchNs)
	// Earlier sub-slices keep pointing at the old array when append reallocates, so they stay
	// valid; the full slice expression keeps a later append from writing into them.
	from := len(c.waitsArena)
	c.waitsArena = append(c.waitsArena, d.waitsOf(s)...)
	c.vgpuWaitsNs = append(c.vgpuWaitsNs, c.waitsArena[from:len(c.waitsArena):len(c.waitsArena)])
	c.smActiveUnavailable = append(c.smActiveUnavailable, boolUint8(s.smActiveUnavailable))
	c.shareReplicas = append(c.shareReplicas, s.shareReplicas)
	c.addEnergy(s.energyMJ, s.energyPrevMJ, s.energyUnavailable, s.powerWatts, s.intervalNs)
}

// addEnergy appends a sample's energy columns: its counter reading and its tick's energy
// (schemas/energy, the one rule every path stores).
func (c *sampleColumns) addEnergy(curMJ, prevMJ uint64, unavailable bool, watts float64, intervalNs uint64) {
	j, estimated := energy.Tick(curMJ, prevMJ, unavailable, watts, intervalNs)
	c.energyCounterMJ = append(c.energyCounterMJ, curMJ)
	c.energyJ = append(c.energyJ, j)
	c.energyEstimated = append(c.energyEstimated, boolUint8(estimated))
}

// estimatedEnergy counts the buffered samples whose energy is estimated.
func (c *sampleColumns) estimatedEnergy() int {
	n := 0
	for _, e := range c.energyEstimated {
		n += int(e)
	}
	return n
}

// reset empties the buffers, keeping their capacity for the next flush.
func (c *sampleColumns) reset() {
	c.time, c.tsNs, c.intervalNs = c.time[:0], c.tsNs[:0], c.intervalNs[:0]
	c.node, c.gpuUUID, c.gpuIndex, c.model = c.node[:0], c.gpuUUID[:0], c.gpuIndex[:0], c.model[:0]
	c.kind, c.instanceID, c.profile, c.attached = c.kind[:0], c.instanceID[:0], c.profile[:0], c.attached[:0]
	c.smActive, c.memUsedBytes, c.memTotalBytes = c.smActive[:0], c.memUsedBytes[:0], c.memTotalBytes[:0]
	c.powerWatts, c.computeSlices, c.smCount = c.powerWatts[:0], c.computeSlices[:0], c.smCount[:0]
	c.gpuSMCount, c.gpuMemTotalBytes = c.gpuSMCount[:0], c.gpuMemTotalBytes[:0]
	c.vgpuRunNs, c.vgpuSwitchNs = c.vgpuRunNs[:0], c.vgpuSwitchNs[:0]
	clear(c.vgpuWaitsNs) // drop references to the decoded messages' slices
	c.vgpuWaitsNs = c.vgpuWaitsNs[:0]
	c.smActiveUnavailable = c.smActiveUnavailable[:0]
	c.shareReplicas = c.shareReplicas[:0]
	c.energyCounterMJ, c.energyJ, c.energyEstimated = c.energyCounterMJ[:0], c.energyJ[:0], c.energyEstimated[:0]
	c.waitsArena = c.waitsArena[:0]
}

// allocationColumns buffers allocation rows.
type allocationColumns struct {
	allocationID []string
	tenant       []string
	tier         []string
	node         []string
	instanceID   []string
	requestedNs  []int64
	startedNs    []int64
	endedNs      []int64
	version      []uint64
	deleted      []uint8
	received     []time.Time
}

// columns returns the slices in the order of tables.AllocationColumns.
func (c *allocationColumns) columns() []any {
	return []any{
		c.allocationID, c.tenant, c.tier, c.node, c.instanceID, c.requestedNs, c.startedNs,
		c.endedNs, c.version, c.deleted, c.received,
	}
}

func (c *allocationColumns) len() int { return len(c.allocationID) }

func (c *allocationColumns) add(a *pb.AllocationEvent, received time.Time) {
	c.allocationID = append(c.allocationID, a.GetAllocationId())
	c.tenant = append(c.tenant, a.GetTenant())
	c.tier = append(c.tier, a.GetTier())
	c.node = append(c.node, a.GetNode())
	c.instanceID = append(c.instanceID, a.GetInstanceId())
	c.requestedNs = append(c.requestedNs, a.GetRequestedAtNs())
	c.startedNs = append(c.startedNs, a.GetStartedAtNs())
	c.endedNs = append(c.endedNs, a.GetEndedAtNs())
	c.version = append(c.version, a.GetVersion())
	c.deleted = append(c.deleted, boolUint8(a.GetDeleted()))
	c.received = append(c.received, received.UTC().Truncate(time.Second))
}

func (c *allocationColumns) reset() {
	c.allocationID, c.tenant, c.tier = c.allocationID[:0], c.tenant[:0], c.tier[:0]
	c.node, c.instanceID = c.node[:0], c.instanceID[:0]
	c.requestedNs, c.startedNs, c.endedNs = c.requestedNs[:0], c.startedNs[:0], c.endedNs[:0]
	c.version, c.deleted, c.received = c.version[:0], c.deleted[:0], c.received[:0]
}

// insertColumns sends one INSERT with the given columns as a single batch.
func insertColumns(ctx context.Context, conn driver.Conn, table string, names []string, columns []any) error {
	batch, err := conn.PrepareBatch(ctx, tables.Insert(table, names))
	if err != nil {
		return fmt.Errorf("prepare insert into %s: %w", table, err)
	}
	defer batch.Close()
	for i, col := range columns {
		if err := batch.Column(i).Append(col); err != nil {
			return fmt.Errorf("append column %s of %s: %w", names[i], table, err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("insert into %s: %w", table, err)
	}
	return nil
}
