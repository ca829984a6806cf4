package nvmlsource

import (
	"reflect"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func entry(runlist uint32, end, run, total, cumSwitch uint64) nvml.VgpuSchedulerLogEntry_v2 {
	return nvml.VgpuSchedulerLogEntry_v2{Timestamp: end, TimeRun: run, TimeRunTotal: total, SwRunlistId: runlist, CumulativePreemptionTime: cumSwitch}
}

func TestSchedLogWindows(t *testing.T) {
	const gap = 100
	tests := []struct {
		name     string
		reads    [][]nvml.VgpuSchedulerLogEntry_v2 // one read before each window
		windows  [][2]int64
		want     []schedTick
		wantLate uint64
	}{{
		name: "two runlists alternate, switch after each run",
		reads: [][]nvml.VgpuSchedulerLogEntry_v2{{
			entry(0, 10, 10, 10, 1), entry(1, 21, 10, 10, 1), entry(0, 32, 10, 20, 2), entry(1, 43, 10, 20, 2),
		}},
		windows: [][2]int64{{0, 50}},
		want: []schedTick{{
			run:   map[uint32]int64{0: 20, 1: 20},
			waits: map[uint32][]uint64{0: {12}, 1: {12}}, switching: 4,
		}},
	}, {
		name: "a run across the window boundary is split; its wait counts where it starts",
		reads: [][]nvml.VgpuSchedulerLogEntry_v2{
			{entry(0, 10, 10, 10, 0), entry(0, 55, 10, 20, 0)},
			{entry(0, 55, 10, 20, 0)}, // read again: not counted twice
		},
		windows: [][2]int64{{0, 50}, {50, 100}},
		want: []schedTick{
			{run: map[uint32]int64{0: 15}, waits: map[uint32][]uint64{0: {35}}},
			{run: map[uint32]int64{0: 5}, waits: map[uint32][]uint64{}},
		},
	}, {
		name:    "a pause of a whole interval is no wait: the vGPU had no work",
		reads:   [][]nvml.VgpuSchedulerLogEntry_v2{{entry(0, 10, 10, 10, 0), entry(0, 130, 10, 20, 0)}},
		windows: [][2]int64{{0, 200}},
		want:    []schedTick{{run: map[uint32]int64{0: 20}, waits: map[uint32][]uint64{}}},
	}, {
		name: "an entry of an already reported window is late: counted, its wait goes into the next window",
		reads: [][]nvml.VgpuSchedulerLogEntry_v2{
			{entry(0, 10, 10, 10, 0)},
			{entry(0, 48, 10, 20, 0)},
		},
		windows:  [][2]int64{{0, 40}, {40, 80}},
		want:     []schedTick{{run: map[uint32]int64{0: 10}, waits: map[uint32][]uint64{}}, {run: map[uint32]int64{0: 8}, waits: map[uint32][]uint64{0: {28}}}},
		wantLate: 1,
	}, {
		name:    "the ring read out of order is sorted",
		reads:   [][]nvml.VgpuSchedulerLogEntry_v2{{entry(1, 21, 10, 10, 1), entry(0, 10, 10, 10, 1)}},
		windows: [][2]int64{{0, 30}},
		want:    []schedTick{{run: map[uint32]int64{0: 10, 1: 10}, waits: map[uint32][]uint64{}, switching: 2}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newSchedLog()
			for i, w := range tc.windows {
				l.ingest(tc.reads[i], gap)
				got := l.window(w[0], w[1])
				for k, v := range got.run {
					if v == 0 {
						delete(got.run, k)
					}
				}
				if !reflect.DeepEqual(got, tc.want[i]) {
					t.Errorf("window %v: got %+v, want %+v", w, got, tc.want[i])
				}
			}
			if l.late != tc.wantLate {
				t.Errorf("late %d, want %d", l.late, tc.wantLate)
			}
		})
	}
}

func TestSampleValue(t *testing.T) {
	le := func(v uint64) (b [8]byte) {
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		return b
	}
	tests := []struct {
		vt   nvml.ValueType
		b    [8]byte
		want float64
		ok   bool
	}{
		{nvml.VALUE_TYPE_UNSIGNED_INT, le(87), 87, true},
		{nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, le(1 << 40), 1 << 40, true},
		{nvml.VALUE_TYPE_SIGNED_INT, le(0xffffffff), -1, true},
		{nvml.VALUE_TYPE_DOUBLE, le(0x4029000000000000), 12.5, true},
		{nvml.VALUE_TYPE_UNSIGNED_SHORT, le(0x10005), 5, true},
		{nvml.VALUE_TYPE_COUNT, le(1), 0, false},
	}
	for _, tc := range tests {
		got, ok := sampleValue(tc.vt, tc.b)
		if got != tc.want || ok != tc.ok {
			t.Errorf("sampleValue(%d, %v) = %v, %v; want %v, %v", tc.vt, tc.b, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzSchedLog(f *testing.F) {
	f.Add(uint64(10), uint64(10), uint32(0), uint64(5), int64(0), int64(50))
	f.Fuzz(func(t *testing.T, end, run uint64, runlist uint32, cum uint64, from, to int64) {
		l := newSchedLog()
		l.ingest([]nvml.VgpuSchedulerLogEntry_v2{entry(runlist, end, run, run, cum)}, 100)
		if to < from {
			from, to = to, from
		}
		got := l.window(from, to)
		for _, v := range got.run {
			if v < 0 || (to-from >= 0 && v > to-from) {
				t.Fatalf("run %d outside window [%d, %d)", v, from, to)
			}
		}
	})
}
