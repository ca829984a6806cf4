package validate

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaxTenantLen is the longest tenant name, in characters.
const MaxTenantLen = 128

// Tenant checks a tenant name: 1–128 characters of letters, digits and `. _ - : @ /`, not
// starting with `_` (reserved for report rows such as __unallocated__) nor with `= + - @`
// (a spreadsheet would read the name as a formula).
func Tenant(name string) *Refusal {
	const expected = "1-128 letters, digits or . _ - : @ /, not starting with _ = + - @"
	n := 0
	for _, r := range name {
		n++
		if !tenantRune(r) {
			return invalid("tenant", strconv.Quote(name), expected+fmt.Sprintf(" (%q is not allowed)", r))
		}
	}
	switch {
	case n == 0:
		return &Refusal{ReasonMissingTenant, "tenant", "empty", "a non-empty name"}
	case n > MaxTenantLen:
		return invalid("tenant", strconv.Quote(name[:32])+fmt.Sprintf("… (%d characters)", n), expected)
	case strings.ContainsRune("_=+-@", rune(name[0])):
		return invalid("tenant", strconv.Quote(name), expected+" (_ is reserved, = + - @ start a formula)")
	}
	return nil
}

// tenantRune is a character a tenant name may hold. Letters and digits are ASCII only:
// look-alike letters from other scripts would let two tenants read the same on a bill.
func tenantRune(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return true
	}
	return strings.ContainsRune("._-:@/", r)
}

// Allocation is an allocation's fields as the validator reads them: times as ns since the Unix
// epoch, 0 for not set (EndedAtNs 0: still running), as on the wire.
type Allocation struct {
	ID, Tenant, Tier, Node, InstanceID    string
	RequestedAtNs, StartedAtNs, EndedAtNs int64
}

// CheckAllocation validates a; nil means it can be stored. A known tier is not checked here:
// only a door with a price book can (CheckTier).
func CheckAllocation(a Allocation) *Refusal {
	if r := CheckAllocationNames(a); r != nil {
		return r
	}
	return CheckAllocationTimes(a)
}

// CheckAllocationNames checks the ids, the tenant name and that a tier is given.
func CheckAllocationNames(a Allocation) *Refusal {
	for _, f := range []struct{ name, value, reason string }{
		{"allocation_id", a.ID, ReasonMissingAllocationID},
		{"tenant", a.Tenant, ReasonMissingTenant},
		{"tier", a.Tier, ReasonMissingTier},
		{"node", a.Node, ReasonMissingNode},
		{"instance_id", a.InstanceID, ReasonMissingInstanceID},
	} {
		if strings.TrimSpace(f.value) == "" {
			return &Refusal{f.reason, f.name, "empty", "a non-empty name"}
		}
	}
	return Tenant(a.Tenant)
}

// CheckAllocationTimes checks that the allocation started at or after it was requested and,
// when it ended, ended after it started, and that every time given lies in the range a sample's
// ts_ns may (MinTimestamp to MaxTimestampNs): an earlier one is a clock that was never set, a
// later one what no ClickHouse DateTime holds. A time later than the clock is not refused: an
// allocation may be imported or announced with its planned end, and reports bill only to
// their horizon.
func CheckAllocationTimes(a Allocation) *Refusal {
	switch {
	case a.StartedAtNs < a.RequestedAtNs:
		return &Refusal{ReasonStartedBeforeRequest, "started_at", nsTime(a.StartedAtNs), "a time at or after requested_at " + nsTime(a.RequestedAtNs)}
	case a.EndedAtNs != 0 && a.EndedAtNs <= a.StartedAtNs:
		return &Refusal{ReasonEndedNotAfterStarted, "ended_at", nsTime(a.EndedAtNs), "a time after started_at " + nsTime(a.StartedAtNs) + ", or null while running"}
	}
	for _, f := range []struct {
		name string
		ns   int64
	}{{"requested_at", a.RequestedAtNs}, {"started_at", a.StartedAtNs}, {"ended_at", a.EndedAtNs}} {
		// 0 is not set (a topic event may leave requested_at and started_at so; ended_at 0 is running).
		if f.ns != 0 && (f.ns < MinTimestamp.UnixNano() || uint64(f.ns) > MaxTimestampNs) {
			return invalid(f.name, nsTime(f.ns), "a time from "+MinTimestamp.Format(time.RFC3339)+" to "+nsTime(int64(MaxTimestampNs)))
		}
	}
	return nil
}

// CheckTier checks that tier is one of a price book's tiers.
func CheckTier(tier string, tiers map[string]float64) *Refusal {
	if _, ok := tiers[tier]; ok {
		return nil
	}
	return invalid("tier", strconv.Quote(tier), "a tier of the price book ("+strings.Join(slices.Sorted(maps.Keys(tiers)), ", ")+")")
}

func nsTime(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

// MaxAllocationVersion is the highest version an allocation event may carry. The store orders
// versions as UInt64 and writes a change made through the HTTP API or an import at the stored
// version + 1: a version at the top of UInt64 would leave no next one (it wrapped to 0, below
// the frozen state). The Int64 range leaves room for as many changes again, and is what
// producers whose integers are signed (Java's long) can send.
const MaxAllocationVersion = math.MaxInt64

// CheckAllocationVersion refuses an allocation event's version above MaxAllocationVersion.
func CheckAllocationVersion(version uint64) *Refusal {
	if version > MaxAllocationVersion {
		return invalid("version", strconv.FormatUint(version, 10), "a version from 0 to "+strconv.FormatUint(MaxAllocationVersion, 10))
	}
	return nil
}
