package collector

import (
	"time"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
	"github.com/slicemeter/slicemeter/schemas/validate"
)

// Reasons a message or sample is refused. They are metric label values and the value of the
// dead-letter header slicemeter-reason, so the set is small and fixed. Those of a single
// sample or allocation are validate's (the one validator every door shares).
const (
	reasonDecode               = "decode"
	reasonUnknownTopic         = "unknown_topic"
	reasonOverlap              = "overlap"     // holds an instance another live allocation holds (eventcheck.Check)
	reasonTenantMove           = "tenant_move" // moves a live allocation to another tenant (Config.AllowTenantMoves)
	reasonInvalid              = validate.ReasonInvalid
	reasonMissingNode          = validate.ReasonMissingNode
	reasonMissingInstanceID    = validate.ReasonMissingInstanceID
	reasonUnknownKind          = validate.ReasonUnknownKind
	reasonMissingTimestamp     = validate.ReasonMissingTimestamp
	reasonTimestampOutOfRange  = validate.ReasonTimestampOutOfRange
	reasonMissingInterval      = validate.ReasonMissingInterval
	reasonMissingAllocationID  = validate.ReasonMissingAllocationID
	reasonMissingTenant        = validate.ReasonMissingTenant
	reasonMissingTier          = validate.ReasonMissingTier
	reasonStartedBeforeRequest = validate.ReasonStartedBeforeRequest
	reasonEndedNotAfterStarted = validate.ReasonEndedNotAfterStarted
)

// maxTimestampNs is the last nanosecond a ClickHouse DateTime (UInt32 seconds) can hold.
const maxTimestampNs = validate.MaxTimestampNs

// refusal says why something was refused: reason is the label, field the field of the
// sample or event at fault (empty for a whole message), detail is for people.
type refusal struct {
	reason string
	detail string
	field  string
}

func (r *refusal) Error() string { return r.reason + ": " + r.detail }

func fromValidate(r *validate.Refusal) *refusal {
	if r == nil {
		return nil
	}
	return &refusal{reason: r.Reason, detail: r.Error(), field: r.Field}
}

// checkSample validates one sample of a batch against the collector's clock reading now;
// nil means it can be stored.
func checkSample(s *pb.Sample, now time.Time) *refusal {
	return fromValidate(validate.ProtoSample(s, now))
}

// checkWireSample is checkSample for a sample decoded by sampleDecoder.
func checkWireSample(s *wireSample, now time.Time) *refusal {
	return fromValidate(validate.CheckSample(validate.Sample{
		InstanceID: s.instanceID, Kind: s.kind, TsNs: s.tsNs, IntervalNs: s.intervalNs,
		MemUsedBytes: s.memUsed, MemTotalBytes: s.memTotal, SMActive: s.smActive, PowerWatts: s.powerWatts,
		ShareReplicas: s.shareReplicas, VGPUSwitchNs: s.switchNs,
		ComputeSlices: s.computeSlices, SMCount: s.smCount, GPUSMCount: s.gpuSMCount,
	}, now))
}

// checkAllocation validates an allocation event; nil means it can be stored. Its tier is
// checked against tiers unless tiers is nil (a collector started without a price book).
func checkAllocation(a *pb.AllocationEvent, tiers map[string]float64) *refusal {
	if r := validate.CheckAllocation(validate.Allocation{
		ID: a.GetAllocationId(), Tenant: a.GetTenant(), Tier: a.GetTier(), Node: a.GetNode(), InstanceID: a.GetInstanceId(),
		RequestedAtNs: a.GetRequestedAtNs(), StartedAtNs: a.GetStartedAtNs(), EndedAtNs: a.GetEndedAtNs(),
	}); r != nil {
		return fromValidate(r)
	}
	if r := validate.CheckAllocationVersion(a.GetVersion()); r != nil {
		return fromValidate(r)
	}
	if tiers != nil {
		return fromValidate(validate.CheckTier(a.GetTier(), tiers))
	}
	return nil
}
