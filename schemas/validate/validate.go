// Package validate is the one validator of samples and allocations: every door (the
// exporter, the collector, the HTTP API, file import) calls it, so that what one door refuses
// no other door lets in. A refusal names the field, the value and what was expected, and
// carries a fixed reason code that doors use as a metric label and dead-letter header.
package validate

import (
	"fmt"
	"strconv"
)

// Reasons a sample or allocation is refused: metric label values and dead-letter header
// values, so the set is small and fixed. The specific ones predate this package and are kept
// for existing dashboards and alerts; every value check added since is ReasonInvalid.
const (
	ReasonInvalid              = "invalid"
	ReasonMissingInstanceID    = "missing_instance_id"
	ReasonUnknownKind          = "unknown_kind"
	ReasonMissingTimestamp     = "missing_ts"
	ReasonTimestampOutOfRange  = "ts_out_of_range"
	ReasonMissingInterval      = "missing_interval"
	ReasonMissingAllocationID  = "missing_allocation_id"
	ReasonMissingTenant        = "missing_tenant"
	ReasonMissingTier          = "missing_tier"
	ReasonMissingNode          = "missing_node"
	ReasonStartedBeforeRequest = "started_before_requested"
	ReasonEndedNotAfterStarted = "ended_not_after_started"
)

// AllocationReasons are the reasons CheckAllocation and CheckTier refuse an allocation with:
// doors that count refusals by reason create these series at 0 from the start.
func AllocationReasons() []string {
	return []string{ReasonInvalid, ReasonMissingAllocationID, ReasonMissingTenant, ReasonMissingTier, ReasonMissingNode,
		ReasonMissingInstanceID, ReasonStartedBeforeRequest, ReasonEndedNotAfterStarted}
}

// Refusal is why one sample or allocation was refused.
type Refusal struct {
	Reason   string // one of the Reason constants
	Field    string // the field's name in slicemeter.proto (and the allocation files' column)
	Value    string // the value as received, formatted for people
	Expected string
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("%s: %s; expected %s", r.Field, r.Value, r.Expected)
}

func invalid(field, value, expected string) *Refusal {
	return &Refusal{Reason: ReasonInvalid, Field: field, Value: value, Expected: expected}
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
