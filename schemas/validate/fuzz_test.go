package validate

import (
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// FuzzCheckSample holds the validator to its contract on any input: whatever it accepts is
// storable and billable (finite ratios, memory within total, a sane time and interval), and
// whatever it refuses names a field, a value and what was expected.
func FuzzCheckSample(f *testing.F) {
	v := validSample()
	mig := func(slices, sms, gpuSMs uint32) [3]uint32 { return [3]uint32{slices, sms, gpuSMs} }
	for _, seed := range []struct {
		id                      string
		kind                    int32
		ts, interval, used, tot uint64
		sm, power               float64
		switching               uint64
		mig                     [3]uint32
	}{
		{v.InstanceID, int32(v.Kind), v.TsNs, v.IntervalNs, v.MemUsedBytes, v.MemTotalBytes, v.SMActive, v.PowerWatts, 0, mig(3, 42, 108)},
		{"gpu0", 1, 0, 0, 2, 1, math.NaN(), math.Inf(-1), 0, mig(0, 0, 0)},
		{"", 9, MaxTimestampNs + 1, 1 << 63, 0, 0, 5.0, -3.0, 0, mig(0, 0, 0)},
		// vGPUs switching the whole interval (accepted) and beyond it (refused).
		{"gpu0/vgpu0", int32(pb.Kind_KIND_VGPU), v.TsNs, v.IntervalNs, v.MemUsedBytes, v.MemTotalBytes, v.SMActive, v.PowerWatts, v.IntervalNs, mig(0, 0, 0)},
		{"gpu0/vgpu0", int32(pb.Kind_KIND_VGPU), v.TsNs, v.IntervalNs, v.MemUsedBytes, v.MemTotalBytes, v.SMActive, v.PowerWatts, v.IntervalNs + 1, mig(0, 0, 0)},
		{"gpu0/vgpu0", int32(pb.Kind_KIND_VGPU), v.TsNs, v.IntervalNs, v.MemUsedBytes, v.MemTotalBytes, v.SMActive, v.PowerWatts, math.MaxUint64, mig(0, 0, 0)},
		// MIG instances with facts no MIG instance has: 0 slices, 500 SMs of a 108-SM GPU.
		{v.InstanceID, int32(v.Kind), v.TsNs, v.IntervalNs, v.MemUsedBytes, v.MemTotalBytes, v.SMActive, v.PowerWatts, 0, mig(0, 500, 108)},
		{v.InstanceID, int32(v.Kind), v.TsNs, v.IntervalNs, v.MemUsedBytes, v.MemTotalBytes, v.SMActive, v.PowerWatts, 0, mig(7, 108, 108)},
	} {
		f.Add(seed.id, seed.kind, seed.ts, seed.interval, seed.used, seed.tot, seed.sm, seed.power, seed.switching, seed.mig[0], seed.mig[1], seed.mig[2])
	}
	now := testNow
	f.Fuzz(func(t *testing.T, id string, kind int32, ts, interval, used, total uint64, sm, power float64, switching uint64, slices, sms, gpuSMs uint32) {
		s := Sample{InstanceID: id, Kind: pb.Kind(kind), TsNs: ts, IntervalNs: interval,
			MemUsedBytes: used, MemTotalBytes: total, SMActive: sm, PowerWatts: power, VGPUSwitchNs: switching,
			ComputeSlices: slices, SMCount: sms, GPUSMCount: gpuSMs}
		r := CheckSample(s, now)
		if r != nil {
			if r.Reason == "" || r.Field == "" || r.Value == "" || r.Expected == "" {
				t.Fatalf("refusal without reason, field, value or expected: %+v", r)
			}
			return
		}
		switch {
		case id == "" || !KnownKind(s.Kind):
			t.Fatalf("accepted a sample without instance or kind: %+v", s)
		case math.IsNaN(sm) || math.IsInf(sm, 0) || sm < 0 || sm > 1:
			t.Fatalf("accepted sm_active %v", sm)
		case math.IsNaN(power) || math.IsInf(power, 0) || power < 0:
			t.Fatalf("accepted power_watts %v", power)
		case used > total:
			t.Fatalf("accepted mem used %d > total %d", used, total)
		case interval == 0 || interval > uint64(MaxInterval):
			t.Fatalf("accepted interval %d", interval)
		case time.Unix(0, int64(ts)).Before(MinTimestamp) || time.Unix(0, int64(ts)).After(now.Add(MaxAhead)):
			t.Fatalf("accepted ts %d", ts)
		case switching > interval:
			t.Fatalf("accepted vgpu.switch_ns %d over interval_ns %d", switching, interval)
		case s.Kind == pb.Kind_KIND_MIG && (slices < 1 || slices > 7 || sms < 1 || sms > gpuSMs):
			t.Fatalf("accepted a MIG instance of %d slices and %d SMs of %d", slices, sms, gpuSMs)
		}
	})
}

// FuzzCheckAllocationTimes: accepted times are in order and, where set, from 2000 to 2106 (what
// a sample's ts_ns may be); a refusal names the field, the value and what was expected.
func FuzzCheckAllocationTimes(f *testing.F) {
	now, y2000 := testNow.UnixNano(), MinTimestamp.UnixNano()
	for _, seed := range [][3]int64{
		{now, now + 1, 0}, {0, 0, 0}, {1, 2, 3}, {y2000 - 1, y2000, 0}, {y2000, y2000, int64(MaxTimestampNs)},
		{now, now, int64(MaxTimestampNs) + 1}, {-1, now, 0}, {now, now, math.MaxInt64}, {math.MinInt64, 0, 0},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, requested, started, ended int64) {
		a := Allocation{ID: "a1", Tenant: "acme", Tier: "pro", Node: "node-a", InstanceID: "gpu0",
			RequestedAtNs: requested, StartedAtNs: started, EndedAtNs: ended}
		r := CheckAllocation(a)
		if r != nil {
			if r.Reason == "" || r.Field == "" || r.Value == "" || r.Expected == "" {
				t.Fatalf("refusal without reason, field, value or expected: %+v", r)
			}
			return
		}
		if started < requested || ended != 0 && ended <= started {
			t.Fatalf("accepted times out of order: %+v", a)
		}
		for _, ns := range []int64{requested, started, ended} {
			if ns != 0 && (ns < y2000 || uint64(ns) > MaxTimestampNs) {
				t.Fatalf("accepted time %d (%s): %+v", ns, nsTime(ns), a)
			}
		}
	})
}

// FuzzTenant: an accepted name is 1–128 ASCII characters of the allowed set, never reserved
// nor a formula; a refused one says why.
func FuzzTenant(f *testing.F) {
	for _, s := range []string{"acme", "__unallocated__", "=HYPERLINK(\"x\")", "a/b:c@d.e-f_g", "", "\xff", strings.Repeat("a", 129)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		r := Tenant(name)
		if r != nil {
			if r.Field != "tenant" || r.Value == "" || r.Expected == "" || !utf8.ValidString(r.Error()) && utf8.ValidString(name) {
				t.Fatalf("refusal %+v", r)
			}
			return
		}
		if n := len(name); n == 0 || n > MaxTenantLen || strings.ContainsAny(name[:1], "_=+-@") {
			t.Fatalf("accepted %q", name)
		}
		for _, c := range name {
			if !(c < utf8.RuneSelf && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-:@/", c))) {
				t.Fatalf("accepted %q with %q", name, c)
			}
		}
	})
}
