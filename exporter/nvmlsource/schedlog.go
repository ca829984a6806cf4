package nvmlsource

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/slicemeter/slicemeter/internal/lograte"
)

// schedLog turns one physical GPU's vGPU scheduler log into per-tick run time, waits and switch
// time (schemas/README.md, "A sample": its vGPU scheduling data). The driver keeps the latest 200 entries; an
// entry is written when a software runlist (one vGPU) is preempted: its timestamp is the end of
// the run, TimeRun its length, and the growth of CumulativePreemptionTime the switch that
// followed it.
type schedLog struct {
	lastSeen  uint64           // newest entry timestamp ingested
	processed int64            // end of the latest window turned into a tick (ns)
	held      []runSlice       // slices whose run or switch may still reach into a later window
	prevEnd   map[uint32]int64 // runlist → end of its latest run (ns)
	prevCum   map[uint32]uint64
	late      uint64 // slices that started inside an already reported window (their run there is lost)
	prevTotal map[uint32]uint64
	// lost: spans of GPU time (ns) whose entries the driver overwrote before a read (the log
	// wrapped); the windows they reach are unmeasured, never idle.
	lost  [][2]int64
	reads int // reads ingested
	fresh []nvml.VgpuSchedulerLogEntry_v2
}

type runSlice struct {
	runlist   uint32
	start     int64
	runEnd    int64
	switchEnd int64
	wait      int64 // ns since the runlist's previous run; valid when hasWait
	hasWait   bool
	// carry: the run started in a window already reported (its entry came after that read);
	// its wait goes into the next window instead of being lost.
	carry bool
}

// schedTick is one window's scheduling data: per runlist, and GPU-wide switch time.
type schedTick struct {
	run       map[uint32]int64
	waits     map[uint32][]uint64
	switching int64
	lost      bool // part of the window's log was overwritten before it was read
}

func newSchedLog() *schedLog {
	return &schedLog{prevEnd: map[uint32]int64{}, prevCum: map[uint32]uint64{}, prevTotal: map[uint32]uint64{}}
}

// ingest adds the entries not seen before. gap is the sampling interval: a pause of a whole
// interval or more between two runs of a vGPU means it had no work, so it is not a wait. It
// returns the GPU time (ns) whose entries were lost: a full log with no entry of the previous
// read, whose oldest run does not follow its runlist's previous one.
func (l *schedLog) ingest(entries []nvml.VgpuSchedulerLogEntry_v2, gap int64) (lost int64) {
	// fresh lives in a buffer of the log's own: a read comes at least five times a second.
	fresh := l.fresh[:0]
	for _, e := range entries {
		if e.Timestamp > l.lastSeen {
			fresh = append(fresh, e)
		}
	}
	l.fresh = fresh
	// The driver's ring is not necessarily in time order once it has wrapped.
	slices.SortFunc(fresh, func(a, b nvml.VgpuSchedulerLogEntry_v2) int { return cmp.Compare(a.Timestamp, b.Timestamp) })
	if l.reads > 0 && len(fresh) > 0 && len(fresh) == len(entries) && len(entries) >= schedLogEntries {
		// No overlap with the previous read: lost entries, if the oldest run does not follow
		// its runlist's previous one (a runlist never seen had run 0 before).
		o := fresh[0]
		if prev := l.prevTotal[o.SwRunlistId]; o.TimeRunTotal-o.TimeRun > prev {
			from, to := int64(l.lastSeen), int64(o.Timestamp-o.TimeRun)
			if from == 0 { // nothing seen before: at least that runlist's missing run is lost
				from = to - int64(o.TimeRunTotal-o.TimeRun-prev)
			}
			if to > from {
				l.lost = append(l.lost, [2]int64{from, to})
				lost = to - from
			}
		}
	}
	for _, e := range fresh {
		l.lastSeen = e.Timestamp
		end := int64(e.Timestamp)
		s := runSlice{runlist: e.SwRunlistId, start: end - int64(e.TimeRun), runEnd: end, switchEnd: end}
		if prev, ok := l.prevCum[e.SwRunlistId]; ok && e.CumulativePreemptionTime >= prev {
			s.switchEnd = end + int64(e.CumulativePreemptionTime-prev)
		} else if !ok && e.TimeRunTotal == e.TimeRun {
			// The runlist's first run ever: all of its preemption time is this switch.
			s.switchEnd = end + int64(e.CumulativePreemptionTime)
		}
		l.prevCum[e.SwRunlistId] = e.CumulativePreemptionTime
		l.prevTotal[e.SwRunlistId] = e.TimeRunTotal
		if pe, ok := l.prevEnd[e.SwRunlistId]; ok && s.start >= pe && s.start-pe < gap {
			s.wait, s.hasWait = s.start-pe, true
		}
		l.prevEnd[e.SwRunlistId] = end
		if s.start < l.processed {
			l.late++
			s.carry = true
		}
		l.held = append(l.held, s)
	}
	l.reads++
	return lost
}

// schedLogEntries is the driver's scheduler log capacity (NVML_SCHEDULER_SW_MAX_LOG_ENTRIES).
const schedLogEntries = 200

// window reports [from, to) (ns) and forgets what cannot reach a later window.
func (l *schedLog) window(from, to int64) schedTick {
	out := schedTick{run: map[uint32]int64{}, waits: map[uint32][]uint64{}}
	kept := l.held[:0]
	for _, s := range l.held {
		out.run[s.runlist] += overlap(s.start, s.runEnd, from, to)
		out.switching += overlap(s.runEnd, s.switchEnd, from, to)
		if s.hasWait && (s.carry || s.start >= from && s.start < to) {
			out.waits[s.runlist] = append(out.waits[s.runlist], uint64(s.wait))
		}
		s.carry = false
		if s.switchEnd > to || s.runEnd > to {
			kept = append(kept, s)
		}
	}
	l.held = kept
	lost := l.lost[:0]
	for _, sp := range l.lost {
		if sp[1] > from && sp[0] < to {
			out.lost = true
		}
		if sp[1] > to {
			lost = append(lost, sp)
		}
	}
	l.lost = lost
	l.processed = max(l.processed, to)
	return out
}

func overlap(a0, a1, b0, b1 int64) int64 {
	lo, hi := max(a0, b0), min(a1, b1)
	if hi > lo {
		return hi - lo
	}
	return 0
}

// pollSchedulerLog reads the GPU's vGPU scheduler log. The driver keeps 200 entries, so it must
// be read more often than they fill (Poll does it between ticks, SchedPollEvery says how often).
func (s *Source) pollSchedulerLog(g *gpuDev, interval time.Duration) {
	log, r := g.dev.GetVgpuSchedulerLog_v2(nvml.VgpuSchedulerLogInfo_v2{})
	if !s.ok(g, "nvmlDeviceGetVgpuSchedulerLog_v2", r) {
		return
	}
	g.slice = time.Duration(log.Timeslice) * time.Microsecond
	n := min(int(log.EntriesCount), len(log.LogEntries))
	if lost := g.sched.ingest(log.LogEntries[:n], int64(interval)); lost > 0 {
		s.m.lostSched.WithLabelValues(g.uuid).Add(time.Duration(lost).Seconds())
		if s.lostLogs == nil {
			s.lostLogs = lograte.New(s.logger, interval)
		}
		s.lostLogs.Log(context.Background(), time.Now(), slog.LevelWarn, "vgpu_schedlog_wrapped",
			"the vGPU scheduler log wrapped between two reads: its run time is lost, the ticks it reaches are unmeasured",
			"gpu", g.uuid, "lost", time.Duration(lost))
	}
	s.m.lateSched.Add(float64(g.sched.late))
	g.sched.late = 0
}

// SchedPollEvery is how often a vGPU scheduler log with time slice slice (0: not known yet) must
// be read: at least 5 times a second, and before half of the driver's 200 entries (one per run
// slice) are written, so that a late read still overlaps the previous one.
func SchedPollEvery(slice time.Duration) time.Duration {
	every := 200 * time.Millisecond
	if slice > 0 && 100*slice < every {
		every = 100 * slice
	}
	return every
}

// PollEvery is how often, in the source's time, the vGPU scheduler logs must be read between
// ticks (exporter.Poller); 0 where no GPU hosts vGPUs with a scheduler log.
func (s *Source) PollEvery() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var every time.Duration
	for _, g := range s.gpus {
		if g.dev != nil && len(g.vgpus) > 0 && g.schedOK && g.can("nvmlDeviceGetVgpuSchedulerLog_v2") {
			if e := SchedPollEvery(g.slice); every == 0 || e < every {
				every = e
			}
		}
	}
	return every
}

// Poll reads every vGPU GPU's scheduler log (exporter.Poller): the loop calls it between ticks
// on the ticks' clock, so a simulated or replayed node is read on the same schedule as a real one.
// A failed read is counted and logged by the source, as in Read.
func (s *Source) Poll(_ context.Context, _ time.Time, interval time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.gpus {
		if g.dev != nil && len(g.vgpus) > 0 && g.schedOK && g.can("nvmlDeviceGetVgpuSchedulerLog_v2") {
			s.pollSchedulerLog(g, interval)
		}
	}
	return nil
}
