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
	f.Add(v.InstanceID, int32(v.Kind), v.TsNs, v.IntervalNs, v.MemUsedBytes, v.MemTotalBytes, v.SMActive, v.PowerWatts)
	f.Add("gpu0", int32(1), uint64(0), uint64(0), uint64(2), uint64(1), math.NaN(), math.Inf(-1))
	f.Add("", int32(9), MaxTimestampNs+1, uint64(1)<<63, uint64(0), uint64(0), 5.0, -3.0)
	now := testNow
	f.Fuzz(func(t *testing.T, id string, kind int32, ts, interval, used, total uint64, sm, power float64) {
		s := Sample{InstanceID: id, Kind: pb.Kind(kind), TsNs: ts, IntervalNs: interval,
			MemUsedBytes: used, MemTotalBytes: total, SMActive: sm, PowerWatts: power}
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
