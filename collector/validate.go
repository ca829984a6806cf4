package collector

import (
	"fmt"
	"math"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// Reasons a message or sample is refused. They are metric label values and the value of the
// dead-letter header slicemeter-reason, so the set is small and fixed.
const (
	reasonDecode               = "decode"
	reasonUnknownTopic         = "unknown_topic"
	reasonMissingNode          = "missing_node"
	reasonMissingInstanceID    = "missing_instance_id"
	reasonUnknownKind          = "unknown_kind"
	reasonMissingTimestamp     = "missing_ts"
	reasonTimestampOutOfRange  = "ts_out_of_range"
	reasonMissingInterval      = "missing_interval"
	reasonMissingAllocationID  = "missing_allocation_id"
	reasonMissingTenant        = "missing_tenant"
	reasonMissingTier          = "missing_tier"
	reasonStartedBeforeRequest = "started_before_requested"
	reasonEndedNotAfterStarted = "ended_not_after_started"
	reasonOverlap              = "overlap" // holds an instance another live allocation holds (allocation.CheckEvents)
)

// maxTimestampNs is the last nanosecond a ClickHouse DateTime (UInt32 seconds) can hold. A
// later ts_ns would make the whole batch insert fail, over and over: refusing it here keeps
// one bad sample from blocking the stream.
const maxTimestampNs = uint64(math.MaxUint32)*1e9 + 999_999_999

// refusal says why something was refused: reason is the label, detail is for people.
type refusal struct {
	reason string
	detail string
}

func (r *refusal) Error() string { return r.reason + ": " + r.detail }

// checkSample validates one sample of a batch; nil means it can be stored.
func checkSample(s *pb.Sample) *refusal {
	return checkSampleFields(s.GetInstanceId(), s.GetKind(), s.GetTsNs(), s.GetIntervalNs())
}

// checkWireSample is checkSample for a sample decoded by sampleDecoder.
func checkWireSample(s *wireSample) *refusal {
	return checkSampleFields(s.instanceID, s.kind, s.tsNs, s.intervalNs)
}

func checkSampleFields(instanceID string, kind pb.Kind, tsNs, intervalNs uint64) *refusal {
	switch {
	case instanceID == "":
		return &refusal{reasonMissingInstanceID, "instance_id is empty"}
	case !knownKind(kind):
		return &refusal{reasonUnknownKind, fmt.Sprintf("kind %d is not gpu, mig or vgpu", int32(kind))}
	case tsNs == 0:
		return &refusal{reasonMissingTimestamp, "ts_ns is 0"}
	case tsNs > maxTimestampNs:
		return &refusal{reasonTimestampOutOfRange, fmt.Sprintf("ts_ns %d is past what a DateTime holds (2106)", tsNs)}
	case intervalNs == 0:
		return &refusal{reasonMissingInterval, "interval_ns is 0"}
	}
	return nil
}

func knownKind(k pb.Kind) bool {
	return k == pb.Kind_KIND_GPU || k == pb.Kind_KIND_MIG || k == pb.Kind_KIND_VGPU
}

// checkAllocation validates an allocation event; nil means it can be stored.
func checkAllocation(a *pb.AllocationEvent) *refusal {
	switch {
	case a.GetAllocationId() == "":
		return &refusal{reasonMissingAllocationID, "allocation_id is empty"}
	case a.GetTenant() == "":
		return &refusal{reasonMissingTenant, "tenant is empty"}
	case a.GetTier() == "":
		return &refusal{reasonMissingTier, "tier is empty"}
	case a.GetNode() == "":
		return &refusal{reasonMissingNode, "node is empty"}
	case a.GetInstanceId() == "":
		return &refusal{reasonMissingInstanceID, "instance_id is empty"}
	case a.GetStartedAtNs() < a.GetRequestedAtNs():
		return &refusal{reasonStartedBeforeRequest, fmt.Sprintf("started_at_ns %d is before requested_at_ns %d", a.GetStartedAtNs(), a.GetRequestedAtNs())}
	case a.GetEndedAtNs() != 0 && a.GetEndedAtNs() <= a.GetStartedAtNs():
		return &refusal{reasonEndedNotAfterStarted, fmt.Sprintf("ended_at_ns %d is not after started_at_ns %d", a.GetEndedAtNs(), a.GetStartedAtNs())}
	}
	return nil
}
