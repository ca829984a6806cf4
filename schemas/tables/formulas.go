package tables

// Formulas over attribution_minutes rows, for a query that sums them (any grouping).
const (
	// Efficiency is the mean per-sample efficiency weighted by measured time:
	// Σ efficiency_ns / Σ active_ns. Time whose activity was not measured is metered but says
	// nothing about use, so it is not in the denominator; with none measured it is 0.
	Efficiency = "sum(efficiency_ns) / greatest(sum(active_ns), 1)"
	// Metered is the time covered by samples, measured or not, in ns.
	Metered = "sum(metered_ns)"
	// Active is the part of Metered whose activity was measured, in ns.
	Active = "sum(active_ns)"
)

// Formulas over rollup rows (samples_1s, samples_1m, each its fullest version), for a query
// that sums them (any grouping).
const (
	// SMActivity is the mean sm_active of the measured samples: Σ sm_active_sum /
	// Σ active_samples. Samples whose activity was not measured are not in sm_active_sum, so
	// dividing by all samples would read them as idle; with none measured it is 0.
	SMActivity = "sum(sm_active_sum) / greatest(sum(active_samples), 1)"
)

// A rollup row's own columns are computed from the samples it rolls up by RollupSeconds and
// RollupMinutes (rollup.go): its covered time is a union, not a sum, of the samples' pieces.
