package nvmlsource

import (
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// gpmMinGap is NVML's rule for GPM: two samples of one target must be at least 100 ms apart.
const gpmMinGap = 100 * time.Millisecond

// gpmTarget is one GPM target (a whole device, or a MIG GPU instance of it) and its two samples.
type gpmTarget struct {
	prev, cur nvml.GpmSample
	prevAt    time.Time
	have      bool
	last      gpmValues
	lastOK    bool
	req       nvml.GpmMetricsGetType // reused: the request holds 477 metric slots
}

// gpmValues are ratios 0..1.
type gpmValues struct{ sm, occupancy, tensor, dram float64 }

var gpmMetricIDs = [...]nvml.GpmMetricId{
	nvml.GPM_METRIC_SM_UTIL, nvml.GPM_METRIC_SM_OCCUPANCY, nvml.GPM_METRIC_ANY_TENSOR_UTIL, nvml.GPM_METRIC_DRAM_BW_UTIL,
}

func (s *Source) newGPM(g *gpuDev) *gpmTarget {
	a, r := s.lib.GpmSampleAlloc()
	if !s.ok(g, "nvmlGpmSampleAlloc", r) {
		return nil
	}
	b, r := s.lib.GpmSampleAlloc()
	if !s.ok(g, "nvmlGpmSampleAlloc", r) {
		_ = a.Free()
		return nil
	}
	return &gpmTarget{prev: a, cur: b}
}

func (t *gpmTarget) free() {
	if t != nil {
		_ = t.prev.Free()
		_ = t.cur.Free()
	}
}

// primeGPM takes a whole GPU's first GPM sample, so that the first tick has a value.
func (s *Source) primeGPM(g *gpuDev, now time.Time) {
	if g.dev == nil || !g.gpm || g.mig || g.devGPM != nil {
		return
	}
	g.devGPM = s.newGPM(g)
	s.sampleGPM(g, g.devGPM, -1, now)
}

// sampleGPM takes a sample into t.cur and makes it the latest (gi < 0: the whole device).
func (s *Source) sampleGPM(g *gpuDev, t *gpmTarget, gi int, now time.Time) bool {
	if t == nil {
		return false
	}
	g.gpmMu.Lock()
	defer g.gpmMu.Unlock()
	var r nvml.Return
	call := "nvmlGpmSampleGet"
	if gi < 0 {
		r = g.dev.GpmSampleGet(t.cur)
	} else {
		call = "nvmlGpmMigSampleGet"
		r = g.dev.GpmMigSampleGet(gi, t.cur)
	}
	if !s.ok(g, call, r) {
		return false
	}
	t.prev, t.cur = t.cur, t.prev
	t.prevAt, t.have = now, true
	return true
}

// readGPM samples the target and computes its metrics over the time since its previous sample.
func (s *Source) readGPM(g *gpuDev, t *gpmTarget, gi int, now time.Time) (gpmValues, bool) {
	if t == nil {
		return gpmValues{}, false
	}
	if t.have && now.Sub(t.prevAt) < gpmMinGap {
		return t.last, t.lastOK // too soon for a new GPM sample: the latest figures stand
	}
	had := t.have
	if !s.sampleGPM(g, t, gi, now) || !had {
		return gpmValues{}, false
	}
	g.gpmMu.Lock()
	defer g.gpmMu.Unlock()
	t.req.Version = nvml.GPM_METRICS_GET_VERSION
	t.req.NumMetrics = uint32(len(gpmMetricIDs))
	t.req.Sample1, t.req.Sample2 = t.cur, t.prev // after the swap, prev is the newest
	for i, id := range gpmMetricIDs {
		t.req.Metrics[i] = nvml.GpmMetric{MetricId: uint32(id)}
	}
	if !s.ok(g, "nvmlGpmMetricsGet", s.lib.GpmMetricsGet(&t.req)) {
		t.lastOK = false
		return gpmValues{}, false
	}
	val := func(i int) (float64, bool) {
		m := t.req.Metrics[i]
		return m.Value / 100, nvml.Return(m.NvmlReturn) == nvml.SUCCESS
	}
	var v gpmValues
	var ok bool
	if v.sm, ok = val(0); !ok {
		t.lastOK = false
		return gpmValues{}, false
	}
	v.occupancy, _ = val(1)
	v.tensor, _ = val(2)
	v.dram, _ = val(3)
	t.last, t.lastOK = v, true
	return v, true
}
