package validate

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/slicemeter/slicemeter/schemas/hardware"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// Limits of a sample's values.
const (
	// MaxInterval is the longest time one sample may stand for: a longer one would meter time
	// nobody measured (a 10-year interval once metered its whole minute).
	MaxInterval = 60 * time.Second
	// MaxAhead is how far ahead of the validating clock a sample may be (clock skew between
	// hosts); later ones would bill the future.
	MaxAhead = 10 * time.Minute
	// MaxShareReplicas bounds a shared GPU's replicas: the device plugin hands out a few per
	// GPU (tens at most); more is a corrupt count that would bill a GPU to dust.
	MaxShareReplicas = 1024
)

// MinTimestamp is the earliest sample time accepted: anything before is a clock that was never set.
var MinTimestamp = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// MaxTimestampNs is the last nanosecond a ClickHouse DateTime (UInt32 seconds) can hold. A
// later ts_ns would make the whole batch insert fail, over and over.
const MaxTimestampNs = uint64(math.MaxUint32)*1e9 + 999_999_999

// Sample is the part of a pb.Sample the validator reads, as plain values so that the
// collector's wire decoder can be validated without building a pb.Sample.
type Sample struct {
	InstanceID                  string
	Kind                        pb.Kind
	TsNs, IntervalNs            uint64
	MemUsedBytes, MemTotalBytes uint64
	SMActive, PowerWatts        float64
	ShareReplicas               uint32 // kind share only
	VGPUSwitchNs                uint64 // vgpu.switch_ns: time the vGPU scheduler spent switching in the interval
	// A MIG instance's static facts: its compute slices (of 7), its SMs and its GPU's SMs.
	ComputeSlices, SMCount, GPUSMCount uint32
}

// FromProto is the validated view of s.
func FromProto(s *pb.Sample) Sample {
	return Sample{
		InstanceID: s.GetInstanceId(), Kind: s.GetKind(), TsNs: s.GetTsNs(), IntervalNs: s.GetIntervalNs(),
		MemUsedBytes: s.GetMemUsedBytes(), MemTotalBytes: s.GetMemTotalBytes(),
		SMActive: s.GetSmActive(), PowerWatts: s.GetPowerWatts(), ShareReplicas: s.GetShareReplicas(),
		VGPUSwitchNs:  s.GetVgpu().GetSwitchNs(),
		ComputeSlices: s.GetComputeSlices(), SMCount: s.GetSmCount(), GPUSMCount: s.GetGpuSmCount(),
	}
}

// ProtoSample validates s against the clock reading now; nil means it can be stored.
func ProtoSample(s *pb.Sample, now time.Time) *Refusal { return CheckSample(FromProto(s), now) }

// CheckSample validates s against the clock reading now; nil means it can be stored.
func CheckSample(s Sample, now time.Time) *Refusal {
	switch {
	case s.InstanceID == "":
		return &Refusal{ReasonMissingInstanceID, "instance_id", `""`, "a non-empty instance id"}
	case !KnownKind(s.Kind):
		return &Refusal{ReasonUnknownKind, "kind", strconv.Itoa(int(s.Kind)), "gpu, mig, vgpu or share (1, 2, 3 or 4)"}
	case s.TsNs == 0:
		return &Refusal{ReasonMissingTimestamp, "ts_ns", "0", "ns since the Unix epoch"}
	case s.TsNs > MaxTimestampNs:
		return &Refusal{ReasonTimestampOutOfRange, "ts_ns", strconv.FormatUint(s.TsNs, 10), "a time a DateTime holds (before 2106)"}
	case s.TsNs < uint64(MinTimestamp.UnixNano()):
		return invalid("ts_ns", tsValue(s.TsNs), "a time at or after "+MinTimestamp.Format(time.RFC3339))
	case s.TsNs > uint64(now.Add(MaxAhead).UnixNano()):
		return invalid("ts_ns", tsValue(s.TsNs), fmt.Sprintf("a time at most %s after the validating clock (%s)", MaxAhead, now.UTC().Format(time.RFC3339)))
	case s.IntervalNs == 0:
		return &Refusal{ReasonMissingInterval, "interval_ns", "0", "an interval in (0, 60s]"}
	case s.IntervalNs > uint64(MaxInterval):
		return invalid("interval_ns", strconv.FormatUint(s.IntervalNs, 10), fmt.Sprintf("an interval in (0, %s]", MaxInterval))
	case s.VGPUSwitchNs > s.IntervalNs:
		// The switches happen within the interval; more is a corrupt counter, which attribution
		// would otherwise clamp to a vGPU that did nothing but switch.
		return invalid("vgpu.switch_ns", strconv.FormatUint(s.VGPUSwitchNs, 10), fmt.Sprintf("at most interval_ns (%d)", s.IntervalNs))
	case !(s.SMActive >= 0 && s.SMActive <= 1): // also NaN
		return invalid("sm_active", formatFloat(s.SMActive), "a ratio in [0, 1]")
	case !(s.PowerWatts >= 0 && s.PowerWatts <= math.MaxFloat64): // also NaN and +Inf
		return invalid("power_watts", formatFloat(s.PowerWatts), "a finite power >= 0")
	case s.Kind == pb.Kind_KIND_SHARE && (s.ShareReplicas < 1 || s.ShareReplicas > MaxShareReplicas):
		// Its billed fraction is 1/share_replicas: 0 would divide by zero.
		return invalid("share_replicas", strconv.FormatUint(uint64(s.ShareReplicas), 10), fmt.Sprintf("the GPU's replicas, 1 to %d, on a share instance", MaxShareReplicas))
	case s.Kind != pb.Kind_KIND_SHARE && s.ShareReplicas != 0:
		return invalid("share_replicas", strconv.FormatUint(uint64(s.ShareReplicas), 10), "0 on a "+s.Kind.Label()+" instance (only share instances are replicas)")
	case s.MemUsedBytes > s.MemTotalBytes:
		return invalid("mem_used_bytes", strconv.FormatUint(s.MemUsedBytes, 10), fmt.Sprintf("at most mem_total_bytes (%d)", s.MemTotalBytes))
	case s.Kind == pb.Kind_KIND_MIG:
		return checkMIG(s)
	}
	return nil
}

// checkMIG refuses a MIG sample whose static facts no MIG instance has: a MIG instance is
// billed compute_slices/7 of its GPU and its activity is weighed by sm_count/gpu_sm_count, so
// 0 slices bills nothing and 500 SMs on a 108-SM GPU counts the GPU's activity 4.6 times.
func checkMIG(s Sample) *Refusal {
	switch {
	case s.ComputeSlices < 1 || s.ComputeSlices > hardware.MaxComputeSlices:
		return invalid("compute_slices", strconv.FormatUint(uint64(s.ComputeSlices), 10), fmt.Sprintf("the compute slices of a MIG profile, 1 to %d", hardware.MaxComputeSlices))
	case s.GPUSMCount == 0:
		return invalid("gpu_sm_count", "0", "the SMs of the MIG instance's GPU, at least 1")
	case s.SMCount < 1 || s.SMCount > s.GPUSMCount:
		return invalid("sm_count", strconv.FormatUint(uint64(s.SMCount), 10), fmt.Sprintf("the SMs of the MIG instance, 1 to its GPU's gpu_sm_count (%d)", s.GPUSMCount))
	}
	return nil
}

// KnownKind reports whether k is a kind of instance attribution knows.
func KnownKind(k pb.Kind) bool {
	return k == pb.Kind_KIND_GPU || k == pb.Kind_KIND_MIG || k == pb.Kind_KIND_VGPU || k == pb.Kind_KIND_SHARE
}

func tsValue(ns uint64) string {
	t := time.Unix(0, int64(min(ns, math.MaxInt64))).UTC()
	return fmt.Sprintf("%d (%s)", ns, t.Format(time.RFC3339Nano))
}
