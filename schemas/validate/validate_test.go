package validate

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

var testNow = time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)

func validSample() Sample {
	return Sample{
		InstanceID: "gpu0/mig0", Kind: pb.Kind_KIND_MIG, TsNs: uint64(testNow.UnixNano()), IntervalNs: 1e8,
		MemUsedBytes: 1 << 30, MemTotalBytes: 10 << 30, SMActive: 0.5, PowerWatts: 300,
		ComputeSlices: 3, SMCount: 42, GPUSMCount: 108, // an A100's 3g.20gb
	}
}

func TestCheckSample(t *testing.T) {
	for _, tc := range []struct {
		name          string
		mutate        func(*Sample)
		reason, field string // empty: valid
	}{
		{"valid", func(*Sample) {}, "", ""},
		{"sm_active 0", func(s *Sample) { s.SMActive = 0 }, "", ""},
		{"sm_active 1", func(s *Sample) { s.SMActive = 1 }, "", ""},
		{"mem used = total", func(s *Sample) { s.MemUsedBytes = s.MemTotalBytes }, "", ""},
		{"interval 60 s", func(s *Sample) { s.IntervalNs = uint64(60 * time.Second) }, "", ""},
		{"10 min ahead", func(s *Sample) { s.TsNs = uint64(testNow.Add(MaxAhead).UnixNano()) }, "", ""},
		{"year 2000", func(s *Sample) { s.TsNs = uint64(MinTimestamp.UnixNano()) }, "", ""},
		{"no instance", func(s *Sample) { s.InstanceID = "" }, ReasonMissingInstanceID, "instance_id"},
		{"unknown kind", func(s *Sample) { s.Kind = 42 }, ReasonUnknownKind, "kind"},
		{"no ts", func(s *Sample) { s.TsNs = 0 }, ReasonMissingTimestamp, "ts_ns"},
		{"past 2106", func(s *Sample) { s.TsNs = MaxTimestampNs + 1 }, ReasonTimestampOutOfRange, "ts_ns"},
		{"before 2000", func(s *Sample) { s.TsNs = uint64(MinTimestamp.UnixNano()) - 1 }, ReasonInvalid, "ts_ns"},
		{"over 10 min ahead", func(s *Sample) { s.TsNs = uint64(testNow.Add(MaxAhead).UnixNano()) + 1 }, ReasonInvalid, "ts_ns"},
		{"no interval", func(s *Sample) { s.IntervalNs = 0 }, ReasonMissingInterval, "interval_ns"},
		{"interval over 60 s", func(s *Sample) { s.IntervalNs = uint64(60*time.Second) + 1 }, ReasonInvalid, "interval_ns"},
		{"10-year interval", func(s *Sample) { s.IntervalNs = uint64(10 * 365 * 24 * time.Hour) }, ReasonInvalid, "interval_ns"},
		{"sm_active NaN", func(s *Sample) { s.SMActive = math.NaN() }, ReasonInvalid, "sm_active"},
		{"sm_active +Inf", func(s *Sample) { s.SMActive = math.Inf(1) }, ReasonInvalid, "sm_active"},
		{"sm_active 5", func(s *Sample) { s.SMActive = 5 }, ReasonInvalid, "sm_active"},
		{"sm_active -3", func(s *Sample) { s.SMActive = -3 }, ReasonInvalid, "sm_active"},
		{"power NaN", func(s *Sample) { s.PowerWatts = math.NaN() }, ReasonInvalid, "power_watts"},
		{"power +Inf", func(s *Sample) { s.PowerWatts = math.Inf(1) }, ReasonInvalid, "power_watts"},
		{"power -Inf", func(s *Sample) { s.PowerWatts = math.Inf(-1) }, ReasonInvalid, "power_watts"},
		{"power negative", func(s *Sample) { s.PowerWatts = -1 }, ReasonInvalid, "power_watts"},
		{"mem used > total", func(s *Sample) { s.MemUsedBytes = s.MemTotalBytes + 1 }, ReasonInvalid, "mem_used_bytes"},
		{"share of 4", func(s *Sample) { s.Kind, s.ShareReplicas = pb.Kind_KIND_SHARE, 4 }, "", ""},
		{"share of 1", func(s *Sample) { s.Kind, s.ShareReplicas = pb.Kind_KIND_SHARE, 1 }, "", ""},
		{"share of max", func(s *Sample) { s.Kind, s.ShareReplicas = pb.Kind_KIND_SHARE, MaxShareReplicas }, "", ""},
		{"share of 0", func(s *Sample) { s.Kind, s.ShareReplicas = pb.Kind_KIND_SHARE, 0 }, ReasonInvalid, "share_replicas"},
		{"share over max", func(s *Sample) { s.Kind, s.ShareReplicas = pb.Kind_KIND_SHARE, MaxShareReplicas+1 }, ReasonInvalid, "share_replicas"},
		{"replicas on mig", func(s *Sample) { s.ShareReplicas = 2 }, ReasonInvalid, "share_replicas"},
		{"vgpu switching the whole interval", func(s *Sample) { s.Kind, s.VGPUSwitchNs = pb.Kind_KIND_VGPU, s.IntervalNs }, "", ""},
		{"vgpu switching beyond the interval", func(s *Sample) { s.Kind, s.VGPUSwitchNs = pb.Kind_KIND_VGPU, s.IntervalNs+1 }, ReasonInvalid, "vgpu.switch_ns"},
		{"vgpu switching for an hour", func(s *Sample) { s.Kind, s.VGPUSwitchNs = pb.Kind_KIND_VGPU, uint64(time.Hour) }, ReasonInvalid, "vgpu.switch_ns"},
		{"mig of 1 slice", func(s *Sample) { s.ComputeSlices, s.SMCount = 1, 14 }, "", ""},
		{"mig of 7 slices, every SM", func(s *Sample) { s.ComputeSlices, s.SMCount = 7, 108 }, "", ""},
		{"mig of 0 slices", func(s *Sample) { s.ComputeSlices = 0 }, ReasonInvalid, "compute_slices"},
		{"mig of 8 slices", func(s *Sample) { s.ComputeSlices = 8 }, ReasonInvalid, "compute_slices"},
		{"mig of 500 SMs on a 108-SM GPU", func(s *Sample) { s.SMCount = 500 }, ReasonInvalid, "sm_count"},
		{"mig of 109 SMs on a 108-SM GPU", func(s *Sample) { s.SMCount = 109 }, ReasonInvalid, "sm_count"},
		{"mig of 0 SMs", func(s *Sample) { s.SMCount = 0 }, ReasonInvalid, "sm_count"},
		{"mig on a GPU of 0 SMs", func(s *Sample) { s.GPUSMCount = 0 }, ReasonInvalid, "gpu_sm_count"},
		{"whole GPU without MIG facts", func(s *Sample) { s.Kind, s.ComputeSlices, s.SMCount, s.GPUSMCount = pb.Kind_KIND_GPU, 0, 0, 0 }, "", ""},
		{"vgpu without MIG facts", func(s *Sample) { s.Kind, s.ComputeSlices, s.SMCount = pb.Kind_KIND_VGPU, 0, 500 }, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := validSample()
			tc.mutate(&s)
			r := CheckSample(s, testNow)
			switch {
			case tc.reason == "" && r != nil:
				t.Fatalf("refused: %v", r)
			case tc.reason == "":
				return
			case r == nil:
				t.Fatalf("accepted, want %s on %s", tc.reason, tc.field)
			case r.Reason != tc.reason || r.Field != tc.field || r.Value == "" || r.Expected == "":
				t.Fatalf("got %+v, want reason %s field %s with a value and what was expected", r, tc.reason, tc.field)
			}
			if !strings.HasPrefix(r.Error(), tc.field+": ") {
				t.Errorf("message %q does not start with the field", r.Error())
			}
		})
	}
}

func TestProtoSampleReadsEveryCheckedField(t *testing.T) {
	s := &pb.Sample{TsNs: uint64(testNow.UnixNano()), IntervalNs: 1e8, Kind: pb.Kind_KIND_GPU, InstanceId: "gpu0",
		SmActive: 0.5, PowerWatts: 100, MemUsedBytes: 1, MemTotalBytes: 2}
	if r := ProtoSample(s, testNow); r != nil {
		t.Fatalf("refused: %v", r)
	}
	mig := &pb.Sample{TsNs: uint64(testNow.UnixNano()), IntervalNs: 1e8, Kind: pb.Kind_KIND_MIG, InstanceId: "gpu0/mig0",
		ComputeSlices: 3, SmCount: 42, GpuSmCount: 108}
	if r := ProtoSample(mig, testNow); r != nil {
		t.Fatalf("MIG refused: %v", r)
	}
	for field, mutate := range map[string]func(){
		"compute_slices": func() { mig.ComputeSlices = 0 },
		"sm_count":       func() { mig.SmCount = 500 },
		"gpu_sm_count":   func() { mig.GpuSmCount = 0 },
	} {
		mig.ComputeSlices, mig.SmCount, mig.GpuSmCount = 3, 42, 108
		mutate()
		if r := ProtoSample(mig, testNow); r == nil || r.Field != field {
			t.Errorf("MIG with a wrong %s: got %v", field, r)
		}
	}
	s.MemUsedBytes = 3
	if r := ProtoSample(s, testNow); r == nil || r.Field != "mem_used_bytes" {
		t.Errorf("mem used > total: got %v", r)
	}
	s.MemUsedBytes, s.Kind = 1, pb.Kind_KIND_SHARE
	if r := ProtoSample(s, testNow); r == nil || r.Field != "share_replicas" {
		t.Errorf("share without replicas: got %v", r)
	}
	s.ShareReplicas = 2
	if r := ProtoSample(s, testNow); r != nil {
		t.Errorf("share of 2 refused: %v", r)
	}
	s.Kind, s.ShareReplicas, s.Vgpu = pb.Kind_KIND_VGPU, 0, &pb.VgpuSchedule{SwitchNs: s.IntervalNs + 1}
	if r := ProtoSample(s, testNow); r == nil || r.Field != "vgpu.switch_ns" {
		t.Errorf("vgpu switching beyond its interval: got %v", r)
	}
}

func TestTenant(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reason string // empty: valid
	}{
		{"acme", ""},
		{"team.a_b-c:d@e/f", ""},
		{"A9", ""},
		{"a", ""},
		{"a-", ""},
		{strings.Repeat("x", MaxTenantLen), ""},
		{"", ReasonMissingTenant},
		{strings.Repeat("x", MaxTenantLen+1), ReasonInvalid},
		{"__unallocated__", ReasonInvalid},
		{"_x", ReasonInvalid},
		{"=HYPERLINK(\"http://x\")", ReasonInvalid},
		{"=cmd", ReasonInvalid},
		{"+1", ReasonInvalid},
		{"-1", ReasonInvalid},
		{"@sum", ReasonInvalid},
		{"a b", ReasonInvalid},
		{"a,b", ReasonInvalid},
		{"a\tb", ReasonInvalid},
		{"a\nb", ReasonInvalid},
		{"ünïcode", ReasonInvalid},
		{"a\xff", ReasonInvalid},
		{"a\"b", ReasonInvalid},
	} {
		r := Tenant(tc.name)
		switch {
		case tc.reason == "" && r != nil:
			t.Errorf("%q refused: %v", tc.name, r)
		case tc.reason != "" && (r == nil || r.Reason != tc.reason || r.Field != "tenant"):
			t.Errorf("%q: got %v, want %s", tc.name, r, tc.reason)
		}
	}
}

func TestCheckAllocation(t *testing.T) {
	valid := func() Allocation {
		return Allocation{ID: "a1", Tenant: "acme", Tier: "pro", Node: "node-a", InstanceID: "gpu0",
			RequestedAtNs: testNow.UnixNano(), StartedAtNs: testNow.UnixNano() + 100}
	}
	min2000, maxNs := MinTimestamp.UnixNano(), int64(MaxTimestampNs)
	for _, tc := range []struct {
		name          string
		mutate        func(*Allocation)
		reason, field string
	}{
		{"valid", func(*Allocation) {}, "", ""},
		{"ended", func(a *Allocation) { a.EndedAtNs = a.StartedAtNs + 1 }, "", ""},
		{"started = requested", func(a *Allocation) { a.StartedAtNs = a.RequestedAtNs }, "", ""},
		{"not requested nor started (a topic event)", func(a *Allocation) { a.RequestedAtNs, a.StartedAtNs = 0, 0 }, "", ""},
		{"from 2000 to 2106", func(a *Allocation) { a.RequestedAtNs, a.StartedAtNs, a.EndedAtNs = min2000, min2000, maxNs }, "", ""},
		{"ends a year ahead (planned)", func(a *Allocation) { a.EndedAtNs = testNow.AddDate(1, 0, 0).UnixNano() }, "", ""},
		{"requested in 1970", func(a *Allocation) { a.RequestedAtNs = 1 }, ReasonInvalid, "requested_at"},
		{"started in 1999", func(a *Allocation) { a.RequestedAtNs, a.StartedAtNs = 0, min2000-1 }, ReasonInvalid, "started_at"},
		{"requested and started in 1970", func(a *Allocation) { a.RequestedAtNs, a.StartedAtNs = 1, 2 }, ReasonInvalid, "requested_at"},
		{"requested before 1970", func(a *Allocation) { a.RequestedAtNs, a.StartedAtNs = -5, testNow.UnixNano() }, ReasonInvalid, "requested_at"},
		{"ends after 2106", func(a *Allocation) { a.EndedAtNs = maxNs + 1 }, ReasonInvalid, "ended_at"},
		{"ends at the end of int64", func(a *Allocation) { a.EndedAtNs = math.MaxInt64 }, ReasonInvalid, "ended_at"},
		{"no id", func(a *Allocation) { a.ID = " " }, ReasonMissingAllocationID, "allocation_id"},
		{"no tenant", func(a *Allocation) { a.Tenant = "" }, ReasonMissingTenant, "tenant"},
		{"reserved tenant", func(a *Allocation) { a.Tenant = "__unallocated__" }, ReasonInvalid, "tenant"},
		{"formula tenant", func(a *Allocation) { a.Tenant = "=1+1" }, ReasonInvalid, "tenant"},
		{"no tier", func(a *Allocation) { a.Tier = "" }, ReasonMissingTier, "tier"},
		{"no node", func(a *Allocation) { a.Node = "" }, ReasonMissingNode, "node"},
		{"no instance", func(a *Allocation) { a.InstanceID = "" }, ReasonMissingInstanceID, "instance_id"},
		{"started before requested", func(a *Allocation) { a.StartedAtNs = a.RequestedAtNs - 1 }, ReasonStartedBeforeRequest, "started_at"},
		{"ended at start", func(a *Allocation) { a.EndedAtNs = a.StartedAtNs }, ReasonEndedNotAfterStarted, "ended_at"},
	} {
		a := valid()
		tc.mutate(&a)
		r := CheckAllocation(a)
		switch {
		case tc.reason == "" && r != nil:
			t.Errorf("%s: refused: %v", tc.name, r)
		case tc.reason != "" && (r == nil || r.Reason != tc.reason || r.Field != tc.field || r.Value == "" || r.Expected == ""):
			t.Errorf("%s: got %+v, want %s on %s with a value and what was expected", tc.name, r, tc.reason, tc.field)
		case r != nil && !slices.Contains(AllocationReasons(), r.Reason):
			t.Errorf("%s: reason %s is not in AllocationReasons()", tc.name, r.Reason)
		}
	}
}

func TestCheckTier(t *testing.T) {
	tiers := map[string]float64{"pro": 1, "budget": 0.7}
	if r := CheckTier("pro", tiers); r != nil {
		t.Errorf("pro refused: %v", r)
	}
	r := CheckTier("gold", tiers)
	if r == nil || r.Reason != ReasonInvalid || r.Field != "tier" || !strings.Contains(r.Expected, "budget, pro") {
		t.Errorf("gold: got %+v", r)
	}
}

func TestCheckAllocationVersion(t *testing.T) {
	for _, tc := range []struct {
		version uint64
		ok      bool
	}{
		{0, true}, {1, true}, {math.MaxInt64, true},
		{math.MaxInt64 + 1, false}, {math.MaxUint64, false}, // no next version: a change would wrap to 0
	} {
		r := CheckAllocationVersion(tc.version)
		if (r == nil) != tc.ok {
			t.Errorf("version %d: %v, want ok %v", tc.version, r, tc.ok)
		}
		if r != nil && (r.Field != "version" || r.Reason != ReasonInvalid || !strings.Contains(r.Error(), strconv.FormatUint(tc.version, 10))) {
			t.Errorf("version %d: %q should name the field and the value", tc.version, r)
		}
	}
}
