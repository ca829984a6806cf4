package collector

import "time"

// rollRow is one samples_1s or samples_1m row computed in the collector's memory, field by
// field what tables.RollupSeconds and tables.RollupMinutes compute in ClickHouse. The sums
// are added in the order ClickHouse adds them (samples by ts_ns, seconds by time), so that a
// row computed here and the same row recomputed from the raw samples are the same numbers.
type rollRow struct {
	time uint32 // the second or the minute, Unix seconds
	meta rowMeta

	samples, covered, attachedSum, switchSum, runSum, firstAttached uint64
	smSum, memSum, powerSum                                         float64
	waitNs, waitCount                                               []uint64 // sorted by waitNs, as sumMap gives them
	activeSamples, activeNs                                         uint64
	takenFirst, takenLast                                           uint64 // ts_ns of the first and last sample taken in the row
	allFirst, allLast                                               uint64 // of every sample with a piece in it
	smNs, switchNs                                                  float64
	memMax                                                          uint64
	energySum                                                       float64
	energyEstimated                                                 uint64

	// Of a samples_1s row: whether its pieces are regular (tables.Regular: one interval, one
	// phase, so their union is the sum of their lengths), the interval and the phase.
	irregular bool
	iv, phase uint64
	pieces    int
}

// rowMeta are the columns a rollup row takes from its first sample (any() in ClickHouse).
type rowMeta struct {
	gpuUUID, model, kind, profile          string
	gpuIndex, computeSlices, smCount       uint32
	gpuSMCount, shareReplicas              uint32
	memTotalBytes, gpuMemTotal, intervalNs uint64
}

func (c *sampleColumns) meta(i int) rowMeta {
	return rowMeta{
		gpuUUID: c.gpuUUID[i], model: c.model[i], kind: c.kind[i], profile: c.profile[i],
		gpuIndex: c.gpuIndex[i], computeSlices: c.computeSlices[i], smCount: c.smCount[i],
		gpuSMCount: c.gpuSMCount[i], shareReplicas: c.shareReplicas[i],
		memTotalBytes: c.memTotalBytes[i], gpuMemTotal: c.gpuMemTotalBytes[i], intervalNs: c.intervalNs[i],
	}
}

// addPiece adds the piece [lo, hi) (ns into the row's second) of sample i of c, whose clamped
// interval is iv; taken says the sample was taken in this second (not earlier, spilling in).
func (r *rollRow) addPiece(c *sampleColumns, i int, lo, hi, iv uint64, taken bool) {
	ts := c.tsNs[i]
	m := c.meta(i)
	if r.pieces == 0 {
		r.meta, r.iv, r.phase = m, iv, ts%iv
		r.allFirst = ts
	} else if m != r.meta || iv != r.iv || ts%iv != r.phase {
		// Another interval or phase (a clock step, a changed interval): the union needs
		// ClickHouse's sweep. Other metadata: any() would depend on the order of reading.
		r.irregular = true
	}
	r.pieces++
	r.allLast = ts
	length := int64(hi - lo)
	measured := c.smActiveUnavailable[i] == 0
	r.covered += hi - lo
	oTick := float64(c.vgpuSwitchNs[i]) / float64(iv)
	r.switchNs += oTick * float64(length)
	if measured {
		r.activeNs += hi - lo
		r.smNs += c.smActive[i] * float64(length)
	}
	if !taken {
		return
	}
	if r.samples == 0 {
		r.takenFirst = ts
	}
	r.takenLast = ts
	r.samples++
	if measured {
		r.smSum += c.smActive[i]
		r.activeSamples++
	}
	if c.attached[i] == 1 {
		r.attachedSum++
		if r.firstAttached == 0 {
			r.firstAttached = ts
		}
	}
	r.switchSum += c.vgpuSwitchNs[i]
	r.runSum += c.vgpuRunNs[i]
	r.memSum += float64(c.memUsedBytes[i])
	r.powerSum += c.powerWatts[i]
	r.memMax = max(r.memMax, c.memUsedBytes[i])
	r.energySum += c.energyJ[i]
	r.energyEstimated += uint64(c.energyEstimated[i])
	for _, w := range c.vgpuWaitsNs[i] {
		r.addWait(w, 1)
	}
}

// addWait adds count occurrences of the wait w, keeping waitNs sorted.
func (r *rollRow) addWait(w, count uint64) {
	n := len(r.waitNs)
	if n > 0 && r.waitNs[n-1] == w {
		r.waitCount[n-1] += count
		return
	}
	i := n
	for i > 0 && r.waitNs[i-1] > w {
		i--
	}
	if i > 0 && r.waitNs[i-1] == w {
		r.waitCount[i-1] += count
		return
	}
	r.waitNs = append(r.waitNs, 0)
	r.waitCount = append(r.waitCount, 0)
	copy(r.waitNs[i+1:], r.waitNs[i:])
	copy(r.waitCount[i+1:], r.waitCount[i:])
	r.waitNs[i], r.waitCount[i] = w, count
}

// firstNs and lastNs are the row's first_ns and last_ns: of the samples taken in it, or of a
// row only covered by samples taken before it, of those.
func (r *rollRow) firstNs() uint64 {
	if r.samples > 0 {
		return r.takenFirst
	}
	return r.allFirst
}

func (r *rollRow) lastNs() uint64 {
	if r.samples > 0 {
		return r.takenLast
	}
	return r.allLast
}

// addSecond adds the samples_1s row s to r, a samples_1m row, as RollupMinutes sums the
// seconds of a minute in time order.
func (r *rollRow) addSecond(s *rollRow) {
	if r.pieces == 0 {
		r.meta = s.meta
		r.allFirst, r.allLast = s.firstNs(), s.lastNs()
	}
	r.pieces++
	r.samples += s.samples
	r.covered += s.covered
	r.smSum += s.smSum
	r.attachedSum += s.attachedSum
	r.switchSum += s.switchSum
	r.runSum += s.runSum
	if s.firstAttached > 0 && (r.firstAttached == 0 || s.firstAttached < r.firstAttached) {
		r.firstAttached = s.firstAttached
	}
	r.memSum += s.memSum
	r.powerSum += s.powerSum
	for i, w := range s.waitNs {
		r.addWait(w, s.waitCount[i])
	}
	r.activeSamples += s.activeSamples
	r.activeNs += s.activeNs
	// first_ns and last_ns: of the seconds with samples taken in them, else of all.
	r.allFirst, r.allLast = min(r.allFirst, s.firstNs()), max(r.allLast, s.lastNs())
	if s.samples > 0 {
		if r.samples == s.samples { // the first second with samples
			r.takenFirst, r.takenLast = s.takenFirst, s.takenLast
		} else {
			r.takenFirst, r.takenLast = min(r.takenFirst, s.takenFirst), max(r.takenLast, s.takenLast)
		}
	}
	r.smNs += s.smNs
	r.switchNs += s.switchNs
	r.memMax = max(r.memMax, s.memMax)
	r.energySum += s.energySum
	r.energyEstimated += s.energyEstimated
}

// clone returns a copy of r that shares no slice with it.
func (r *rollRow) clone() rollRow {
	c := *r
	c.waitNs, c.waitCount = append([]uint64(nil), r.waitNs...), append([]uint64(nil), r.waitCount...)
	return c
}

// rollupColumns buffers rollRows for an insert into samples_1s or samples_1m, in the order of
// tables.RollupColumns.
type rollupColumns struct {
	time                                            []time.Time
	node, instanceID, gpuUUID, model, kind, profile []string
	gpuIndex, computeSlices, smCount, gpuSMCount    []uint32
	memTotal, gpuMemTotal, intervalNs               []uint64
	samples, covered                                []uint64
	smSum                                           []float64
	attachedSum, switchSum, runSum, firstAttached   []uint64
	memSum, powerSum                                []float64
	waitNs, waitCount                               [][]uint64
	activeSamples, activeNs, firstNs, lastNs        []uint64
	smNs, switchNs                                  []float64
	shareReplicas                                   []uint32
	memMax                                          []uint64
	energySum                                       []float64
	energyEstimated                                 []uint64
}

func (c *rollupColumns) add(node, instance string, r *rollRow) {
	c.time = append(c.time, time.Unix(int64(r.time), 0).UTC())
	c.node, c.instanceID = append(c.node, node), append(c.instanceID, instance)
	m := &r.meta
	c.gpuUUID, c.gpuIndex, c.model = append(c.gpuUUID, m.gpuUUID), append(c.gpuIndex, m.gpuIndex), append(c.model, m.model)
	c.kind, c.profile = append(c.kind, m.kind), append(c.profile, m.profile)
	c.computeSlices, c.smCount, c.gpuSMCount = append(c.computeSlices, m.computeSlices), append(c.smCount, m.smCount), append(c.gpuSMCount, m.gpuSMCount)
	c.memTotal, c.gpuMemTotal, c.intervalNs = append(c.memTotal, m.memTotalBytes), append(c.gpuMemTotal, m.gpuMemTotal), append(c.intervalNs, m.intervalNs)
	c.samples, c.covered, c.smSum = append(c.samples, r.samples), append(c.covered, r.covered), append(c.smSum, r.smSum)
	c.attachedSum, c.switchSum, c.runSum = append(c.attachedSum, r.attachedSum), append(c.switchSum, r.switchSum), append(c.runSum, r.runSum)
	c.firstAttached, c.memSum, c.powerSum = append(c.firstAttached, r.firstAttached), append(c.memSum, r.memSum), append(c.powerSum, r.powerSum)
	waitNs, waitCount := r.waitNs, r.waitCount
	if waitNs == nil {
		waitNs, waitCount = []uint64{}, []uint64{}
	}
	c.waitNs, c.waitCount = append(c.waitNs, waitNs), append(c.waitCount, waitCount)
	c.activeSamples, c.activeNs = append(c.activeSamples, r.activeSamples), append(c.activeNs, r.activeNs)
	c.firstNs, c.lastNs = append(c.firstNs, r.firstNs()), append(c.lastNs, r.lastNs())
	c.smNs, c.switchNs = append(c.smNs, r.smNs), append(c.switchNs, r.switchNs)
	c.shareReplicas, c.memMax = append(c.shareReplicas, m.shareReplicas), append(c.memMax, r.memMax)
	c.energySum, c.energyEstimated = append(c.energySum, r.energySum), append(c.energyEstimated, r.energyEstimated)
}

func (c *rollupColumns) len() int { return len(c.time) }

// reset empties the buffers, keeping their capacity for the next flush.
func (c *rollupColumns) reset() {
	clear(c.waitNs) // the rows' histograms
	clear(c.waitCount)
	*c = rollupColumns{
		time: c.time[:0], node: c.node[:0], instanceID: c.instanceID[:0], gpuUUID: c.gpuUUID[:0], model: c.model[:0],
		kind: c.kind[:0], profile: c.profile[:0], gpuIndex: c.gpuIndex[:0], computeSlices: c.computeSlices[:0],
		smCount: c.smCount[:0], gpuSMCount: c.gpuSMCount[:0], memTotal: c.memTotal[:0], gpuMemTotal: c.gpuMemTotal[:0],
		intervalNs: c.intervalNs[:0], samples: c.samples[:0], covered: c.covered[:0], smSum: c.smSum[:0],
		attachedSum: c.attachedSum[:0], switchSum: c.switchSum[:0], runSum: c.runSum[:0], firstAttached: c.firstAttached[:0],
		memSum: c.memSum[:0], powerSum: c.powerSum[:0], waitNs: c.waitNs[:0], waitCount: c.waitCount[:0],
		activeSamples: c.activeSamples[:0], activeNs: c.activeNs[:0], firstNs: c.firstNs[:0], lastNs: c.lastNs[:0],
		smNs: c.smNs[:0], switchNs: c.switchNs[:0], shareReplicas: c.shareReplicas[:0], memMax: c.memMax[:0],
		energySum: c.energySum[:0], energyEstimated: c.energyEstimated[:0],
	}
}

// columns returns the slices in the order of tables.RollupColumns.
func (c *rollupColumns) columns() []any {
	return []any{
		c.time, c.node, c.instanceID, c.gpuUUID, c.gpuIndex, c.model, c.kind, c.profile,
		c.computeSlices, c.smCount, c.gpuSMCount, c.memTotal, c.gpuMemTotal, c.intervalNs,
		c.samples, c.covered, c.smSum, c.attachedSum, c.switchSum, c.runSum,
		c.firstAttached, c.memSum, c.powerSum, c.waitNs, c.waitCount, c.activeSamples,
		c.activeNs, c.firstNs, c.lastNs, c.smNs, c.switchNs, c.shareReplicas, c.memMax,
		c.energySum, c.energyEstimated,
	}
}
