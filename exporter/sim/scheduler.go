package sim

import "time"

// scheduler is the equal-share vGPU scheduler of one physical GPU: round-robin over the vGPUs
// that have work, one time slice each, a switch after every slice. A vGPU alone with work runs
// slice after slice without switches: there is no other context to switch to. When the set of
// busy vGPUs changes (at a tick boundary) a new cycle starts and a slice in progress is cut short.
type scheduler struct {
	timeslice, switching time.Duration

	busy   []bool
	order  []int         // busy vGPUs in index order: their slots in the cycle
	anchor time.Duration // start of the current cycle sequence
}

// runSlice is one run of one vGPU and the switch after it, as offsets from the scenario start.
type runSlice struct {
	vgpu      int
	start     time.Duration
	runEnd    time.Duration
	switchEnd time.Duration
}

func newScheduler(count int, timeslice, switching time.Duration) *scheduler {
	return &scheduler{timeslice: timeslice, switching: switching, busy: make([]bool, count)}
}

// slices returns the runs that start in [t, t+interval) with busy vGPUs busy, in time order.
// busyNext is the set of the next tick: if it differs, a run or switch in progress at
// t+interval is cut there, as the scheduler starts a new cycle.
func (s *scheduler) slices(dst []runSlice, t, interval time.Duration, busy, busyNext []bool) []runSlice {
	if !equal(busy, s.busy) {
		copy(s.busy, busy)
		s.anchor = t
		s.order = s.order[:0]
		for i, b := range busy {
			if b {
				s.order = append(s.order, i)
			}
		}
	}
	k := time.Duration(len(s.order))
	if k == 0 {
		return dst
	}
	slot := s.timeslice + s.switchTime(k)
	period := k * slot
	end := t + interval
	cut := !equal(busy, busyNext)
	first := len(dst)
	for j, idx := range s.order {
		off := s.anchor + time.Duration(j)*slot
		start := off
		if start < t {
			start = off + (t-off+period-1)/period*period
		}
		for ; start < end; start += period {
			rs := runSlice{vgpu: idx, start: start, runEnd: start + s.timeslice, switchEnd: start + slot}
			if cut {
				rs.runEnd, rs.switchEnd = min(rs.runEnd, end), min(rs.switchEnd, end)
			}
			dst = append(dst, rs)
		}
	}
	sortSlices(dst[first:])
	return dst
}

// switchTime is the switch after each slice with k vGPUs busy: none for a vGPU alone.
func (s *scheduler) switchTime(k time.Duration) time.Duration {
	if k < 2 {
		return 0
	}
	return s.switching
}

// sortSlices orders runs by start (insertion sort: a tick holds a few dozen, nearly sorted).
func sortSlices(s []runSlice) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j].start < s[j-1].start; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func overlap(a0, a1, b0, b1 time.Duration) time.Duration {
	lo, hi := max(a0, b0), min(a1, b1)
	if hi > lo {
		return hi - lo
	}
	return 0
}

func equal(a, b []bool) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
