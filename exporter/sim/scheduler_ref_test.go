package sim

import "time"

// The original per-tick scheduler model, kept as the oracle that the scheduler-log path (world
// slices -> nvmlsource translation) must reproduce exactly.

// vgpuTick is what the scheduler log says about one vGPU for one tick.
type vgpuTick struct {
	run       time.Duration
	switching time.Duration // GPU-wide, the same for every vGPU of the GPU
	waits     []uint64      // ns, for runs that started in the tick
}

type refScheduler struct {
	timeslice, switching time.Duration
	busy                 []bool
	order                []int
	anchor               time.Duration
	lastEnd              []time.Duration
	lastValid            []bool
}

func newRefScheduler(count int, timeslice, switching time.Duration) *refScheduler {
	return &refScheduler{timeslice: timeslice, switching: switching,
		busy: make([]bool, count), lastEnd: make([]time.Duration, count), lastValid: make([]bool, count)}
}

// tick advances the schedule over [t, t+interval) with the given vGPUs busy.
func (s *refScheduler) tick(t, interval time.Duration, busy []bool) []vgpuTick {
	if !equal(busy, s.busy) {
		copy(s.busy, busy)
		s.anchor = t
		s.order = s.order[:0]
		for i, b := range busy {
			if b {
				s.order = append(s.order, i)
				if s.lastValid[i] && s.lastEnd[i] > t {
					s.lastEnd[i] = t // the slice in progress was cut short
				}
			} else {
				s.lastValid[i] = false
			}
		}
	}
	out := make([]vgpuTick, len(busy))
	k := time.Duration(len(s.order))
	if k == 0 {
		return out
	}
	slot := s.timeslice + s.switching
	if k == 1 {
		slot = s.timeslice // alone with work: no switches
	}
	period := k * slot
	end := t + interval
	var switching time.Duration
	for j, idx := range s.order {
		off := s.anchor + time.Duration(j)*slot
		m := (t - off - slot) / period
		if m < 0 {
			m = 0
		}
		tk := &out[idx]
		for start := off + m*period; start < end; start += period {
			tk.run += overlap(start, start+s.timeslice, t, end)
			switching += overlap(start+s.timeslice, start+slot, t, end)
			if start >= t {
				if s.lastValid[idx] {
					tk.waits = append(tk.waits, uint64(start-s.lastEnd[idx]))
				}
				s.lastEnd[idx], s.lastValid[idx] = start+s.timeslice, true
			}
		}
	}
	for i := range out {
		out[i].switching = switching
	}
	return out
}
