// Package billing holds attribution's definitions, apart from where the numbers come from:
// an allocation clipped to a window and priced (terms), what its samples add up to (usage),
// its cost, waste, overhead, efficiency and cold start (a Line), the tenants' rows summed from
// the lines, the nearest-rank p99 of the scheduling waits, and the invariants every report
// keeps. It reads nothing: the store reads ClickHouse, and the attribution package puts the
// two together.
//
// # Unmeasured activity
//
// A sample may say that its instance's activity could not be measured (sm_active_unavailable:
// a MIG instance on a GPU without GPM, before Hopper); its sm_active is 0 and means nothing.
// Such time is metered (it is never unmetered: the exporter saw the instance) but says nothing
// about use, so the README's efficiency and waste are taken over the measured time only:
//
//   - an allocation's efficiency is the mean over its metered samples whose activity was
//     measured, weighted by the time each covers in the billed interval;
//   - waste_cost = cost × (1 − o) × (measured metered / billed seconds) × (1 − efficiency);
//   - an allocation without a measured sample has no efficiency (empty in the report, as for
//     an unmetered one) and no waste;
//   - a tenant's efficiency is its allocations' mean weighted by measured seconds.
//
// The overhead is unchanged. With every sample measured these are the README's definitions, and
// cost = used + waste + overhead; the unmeasured share of (1 − o) × cost is neither used nor
// waste. The raw samples carry the flag; samples_1s and samples_1m count the measured samples
// and the time they cover (active_samples, active_ns); attribution_minutes stores the measured
// time (active_ns) so that a window's efficiency is Σ efficiency_ns / Σ active_ns.
package billing
