package validate

import (
	"math"
	"time"
)

// MaxTime is the latest instant stored anywhere: a ClickHouse DateTime (UInt32 seconds) ends at
// 2106-02-07T06:28:15Z. It is also far below where time.Time.UnixNano wraps (2262).
var MaxTime = time.Unix(math.MaxUint32, 999_999_999).UTC()

// TimeRangeText is the accepted range as errors quote it.
var TimeRangeText = "a time from " + MinTimestamp.Format(time.RFC3339) + " to " + MaxTime.Truncate(time.Second).Format(time.RFC3339)

// CheckTime refuses a time outside MinTimestamp..MaxTime. Every door calls it on the parsed
// time, before any conversion to nanoseconds: UnixNano of a time after 2262 wraps into another
// valid-looking time, so a check on the nanoseconds comes too late. field names what was given
// (a query parameter, a JSON field, a file column) and value is the text as given.
func CheckTime(field, value string, t time.Time) *Refusal {
	if t.Before(MinTimestamp) || t.After(MaxTime) {
		return &Refusal{Reason: ReasonInvalid, Field: field, Value: value, Expected: TimeRangeText}
	}
	return nil
}
