// Package store is what attribution reads of the samples for a bill: every query that reads
// the samples, their rollups and the allocations for a report (one file per table or
// concern), the presence of the GPUs (the capacity), the noisy-neighbour signal, memory and
// energy, the models and tiers billed. What the attribution service stores is
// attribution/stored's; what the fleet report reads, attribution/fleet/fleetstore's.
package store

// How the SQL is structured
//
// All SQL runs on ClickHouse 18.16 and on current ClickHouse: no DateTime64, no server-side
// parameters (clickhouse-go binds ? on the client), functions 18.16 has. Nothing relies on
// merges having happened; the deduplicating reads are schemas/tables', shared with the
// collector and the dashboards:
//   - allocations: tables.LatestAllocations; deleted ones dropped after that.
//   - attribution_minutes: tables.LatestPass.
//   - samples and their rollups: tables.Final (FROM samples FINAL) collapses, as it reads,
//     the rows that were delivered more than once (at-least-once; the table is a
//     ReplacingMergeTree by tables.SampleKey) and keeps a rollup row's fullest version;
//     min() and argMax() need no deduplication. FINAL merges the parts it reads in
//     key order: no sort, no hash table of every sample, unlike GROUP BY ts_ns (which needed
//     about 100 bytes of memory a sample and 4 GB for a day of a few hundred instances).
//     Its filters (node, instance_id, ts_ns and time, which is ts_ns in seconds) are the same
//     for every copy of a sample, so filtering before the merge is sound.
//
// Joined subqueries carry aliases (current ClickHouse requires them) and join with
// ALL INNER JOIN ... USING, the form 18.16 knows.
//
// A report takes a few grouped queries, not one per allocation:
//  1. the allocations' current state, those billed in the window (Go clips them);
//  2. every instance seen in the window, grouped by (node, instance_id, gpu_uuid, model): the
//     facts that price an allocation (kind, profile, slices, SMs, framebuffer); targets without
//     a sample in the window get their latest facts from a second query of the same shape over
//     all time; and the GPUs' presence (the capacity), their first and last sample per GPU and
//     bucket of time from a presence period before the window to its end;
//  3. per chunk of allocations, two queries joining the deduplicated samples of their
//     targets with the chunk, grouped by allocation_id: usage (metered and measured time,
//     efficiency, vGPU switch share, and the vGPU waits as a histogram by sumMap) and the
//     first attached sample (cold start), searched first in the quarter hour after
//     requested_at, target by target, and only then further.
//
// The chunk travels inside the query as arrays (ARRAY JOIN of bound arrays gives an inline
// table), so each query is self-contained SQL text and sees exactly the allocations and
// billed intervals that Go clipped; a chunk's queries raise max_query_size for its text.

import "github.com/slicemeter/slicemeter/attribution/internal/chquery"

// Querier is the part of a ClickHouse connection that reading needs (chquery.Querier).
type Querier = chquery.Querier
