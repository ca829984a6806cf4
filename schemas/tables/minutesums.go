package tables

import "strings"

// minuteSum is how every reader of stored minutes (attribution_minutes, and attribution_hours,
// their hourly roll-up with the same columns) aggregates one of their columns over a group of
// them: facts of the allocation (the same in every row) by any, flags and peaks by max,
// amounts by sum, so that the aggregate of consecutive groups' aggregates is the aggregate of
// the whole (the readers sum chunks of a window, the roll-up sums hours).
type minuteSum struct{ column, sum string }

// minuteSums are the aggregated columns in the order the readers scan them; "minutes" stands
// for the number of minutes summed, which each source counts its own way (MinuteSums).
var minuteSums = []minuteSum{
	{"tier", "any(tier)"}, {"requested_ns", "any(requested_ns)"}, {"started_ns", "any(started_ns)"},
	{"sliced", "max(sliced)"}, {"billed_ns", "sum(billed_ns)"}, {"metered_ns", Metered}, {"active_ns", Active},
	{"list_cost", "sum(list_cost)"}, {"cost", "sum(cost)"}, {"waste_cost", "sum(waste_cost)"},
	{"overhead_cost", "sum(overhead_cost)"}, {"efficiency_ns", "sum(efficiency_ns)"},
	{"cold_start_ns", "max(cold_start_ns)"}, {"cold_start_sla_ns", "any(cold_start_sla_ns)"}, {"currency", "any(currency)"},
	{"wait_ns", "tupleElement(sumMap(wait_ns, wait_count), 1)"}, {"wait_count", "tupleElement(sumMap(wait_ns, wait_count), 2)"},
	{"minutes", ""},
	{"overhead_ns", "sum(overhead_ns)"}, {"model", "any(model)"}, {"profile", "any(profile)"}, {"fraction", "max(fraction)"},
	{"node", "any(node)"}, {"instance_id", "any(instance_id)"},
	{"mem_used_ns", "sum(mem_used_ns)"}, {"mem_ns", "sum(mem_ns)"}, {"energy_j", "sum(energy_j)"},
}

// MinuteSums is the select list of the aggregates of stored minutes, in the order their
// readers scan them (after their group keys), with minutes the expression of the number of
// minutes summed: uniqExact(minute) over attribution_minutes, count() over one row a minute,
// sum(minutes) over attribution_hours. A new column of attribution_minutes and
// attribution_hours is one entry of minuteSums, and one scanned value.
func MinuteSums(minutes string) string {
	out := make([]string, len(minuteSums))
	for i, s := range minuteSums {
		out[i] = s.sum
		if s.column == "minutes" {
			out[i] = minutes
		}
	}
	return strings.Join(out, ", ")
}

// MinuteSum is the aggregate of column as MinuteSums has it, false for a column it does not
// aggregate (a group key, the minutes).
func MinuteSum(column string) (string, bool) {
	for _, s := range minuteSums {
		if s.column == column && s.sum != "" {
			return s.sum, true
		}
	}
	return "", false
}

// MinuteSumColumns are the columns of attribution_minutes that MinuteSums aggregates.
func MinuteSumColumns() []string {
	var out []string
	for _, s := range minuteSums {
		if s.sum != "" {
			out = append(out, s.column)
		}
	}
	return out
}
