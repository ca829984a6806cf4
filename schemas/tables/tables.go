// Package tables is the contract of slicemeter's ClickHouse tables, as schemas/migrations
// creates them: each table's columns (the explicit column lists that ClickHouse 18.16 needs in
// an INSERT), the canonical reads that deduplicate them, and the formulas derived from their
// columns, as SQL fragments. Writers and readers use these instead of spelling them out, so
// that the collector, attribution and the dashboards cannot drift apart; a test compares every
// column list with DESCRIBE TABLE on a migrated server.
package tables

import "strings"

// Table names.
const (
	Samples            = "samples"
	Samples1s          = "samples_1s"
	Samples1m          = "samples_1m"
	Allocations        = "allocations"
	AttributionMinutes = "attribution_minutes"
	SchemaMigrations   = "schema_migrations"
	BillingPeriods     = "billing_periods"
	BillingPeriodLines = "billing_period_lines"
	AllocationAudit    = "allocation_audit"
	AttributionHours   = "attribution_hours"
	AttributionHosts   = "attribution_hour_hosts"
	FleetHours         = "fleet_hours"
	FleetHourGPUs      = "fleet_hour_gpus"
	PriceBooks         = "price_books"
	Recomputations     = "recomputations"
)

// SampleColumns are the columns of samples, one row per sample as the exporter took it.
var SampleColumns = []string{
	"time", "ts_ns", "interval_ns", "node", "gpu_uuid", "gpu_index", "model", "kind",
	"instance_id", "profile", "attached", "sm_active", "mem_used_bytes", "mem_total_bytes",
	"power_watts", "compute_slices", "sm_count", "gpu_sm_count", "gpu_mem_total_bytes",
	"vgpu_run_ns", "vgpu_switch_ns", "vgpu_waits_ns", "sm_active_unavailable", "share_replicas",
	"energy_counter_mj", "energy_j", "energy_estimated",
}

// RollupColumns are the columns of samples_1s and samples_1m, one row per (node, instance,
// second or minute) as the collector last recomputed it: the pieces of the samples that cover
// part of the row (RollupSeconds). first_ns and last_ns are the ts_ns of the first and last
// sample taken in it (of a row only covered by samples taken before it: of those).
var RollupColumns = []string{
	"time", "node", "instance_id", "gpu_uuid", "gpu_index", "model", "kind", "profile",
	"compute_slices", "sm_count", "gpu_sm_count", "mem_total_bytes", "gpu_mem_total_bytes", "interval_ns",
	"samples", "covered_ns", "sm_active_sum", "attached_sum", "vgpu_switch_ns_sum", "vgpu_run_ns_sum",
	"first_attached_ns", "mem_used_bytes_sum", "power_watts_sum", "wait_ns", "wait_count", "active_samples",
	"active_ns", "first_ns", "last_ns", "sm_active_ns", "switch_ns", "share_replicas", "mem_used_max_bytes",
	"energy_j_sum", "energy_estimated_samples",
}

// AllocationColumns are the columns of allocations, one row per version of an allocation.
var AllocationColumns = []string{
	"allocation_id", "tenant", "tier", "node", "instance_id", "requested_ns", "started_ns",
	"ended_ns", "version", "deleted", "received",
}

// AttributionMinuteColumns are the columns of attribution_minutes, one row per (minute,
// tenant, allocation) of each pass of the attribution service.
var AttributionMinuteColumns = []string{
	"minute", "tenant", "allocation_id", "tier", "node", "instance_id", "requested_ns", "started_ns",
	"sliced", "billed_ns", "metered_ns", "list_cost", "cost", "waste_cost", "overhead_cost", "efficiency_ns",
	"cold_start_ns", "cold_start_sla_ns", "wait_ns", "wait_count", "currency", "computed_ns", "active_ns", "overhead_ns",
	"model", "profile", "fraction", "mem_used_ns", "mem_ns", "energy_j",
}

// BillingPeriodColumns are the columns of billing_periods, one row per close of a period.
var BillingPeriodColumns = []string{
	"period", "version", "timezone", "window_start", "window_end", "closed_ns", "report", "currency",
	"list_cost", "cost", "waste_cost", "overhead_cost", "unallocated_list_cost", "correction_cost",
}

// BillingPeriodLineColumns are the columns of billing_period_lines, one row per tenant and tier
// of a close (its own rows and its corrections of earlier periods).
var BillingPeriodLineColumns = []string{
	"period", "closed_ns", "corrects", "tenant", "tier", "allocated_ns", "unmetered_ns",
	"list_cost", "cost", "waste_cost", "overhead_cost", "currency",
}

// AllocationAuditColumns are the columns of allocation_audit, one row per allocation write
// (schemas/audit).
var AllocationAuditColumns = []string{
	"time", "at_ns", "door", "principal", "role", "origin", "action", "allocation_id",
	"tenant", "before_tenant", "version", "before", "after",
}

// AttributionHourColumns are the columns of attribution_hours, one row per (hour, tenant,
// allocation) of each roll-up of an hour's stored minutes.
var AttributionHourColumns = []string{
	"hour", "tenant", "allocation_id", "tier", "node", "instance_id", "requested_ns", "started_ns",
	"sliced", "billed_ns", "metered_ns", "active_ns", "list_cost", "cost", "waste_cost", "overhead_cost",
	"efficiency_ns", "overhead_ns", "cold_start_ns", "cold_start_sla_ns", "wait_ns", "wait_count", "currency",
	"model", "profile", "fraction", "minutes", "source_ns", "source_minutes", "mem_used_ns", "mem_ns", "energy_j",
}

// AttributionHostColumns are the columns of attribution_hour_hosts, one row per (hour, node) of
// each roll-up of an hour's stored minutes.
var AttributionHostColumns = []string{"hour", "node", "max_tenants", "source_ns"}

// FleetHourColumns are the columns of fleet_hours, one row per (hour, node, instance) of each
// roll-up of an hour's samples_1m rows.
var FleetHourColumns = []string{
	"hour", "node", "instance_id", "last_time", "gpu_uuid", "model", "kind", "profile", "compute_slices",
	"sm_count", "gpu_sm_count", "mem_total_bytes", "gpu_mem_total_bytes", "share_replicas", "covered_ns",
	"sm_active_ns", "mem_used_ns", "mem_held", "attached", "energy_j", "rolled_ns", "sample_block",
	"sample_first", "sample_last", "source_ns", "source_minutes",
}

// FleetHourGPUColumns are the columns of fleet_hour_gpus, one row per (hour, GPU) of each
// roll-up of an hour.
var FleetHourGPUColumns = []string{"hour", "node", "gpu_uuid", "model", "first_ns", "last_ns", "rolled_ns"}

// PriceBookColumns are the columns of price_books, one row per price book the attribution
// service started with and per step of the re-attribution its change made.
var PriceBookColumns = []string{
	"hash", "first_seen_ns", "book", "reprice_from_ns", "reprice_to_ns", "reprice_next_ns", "reason", "updated_ns",
}

// RecomputationColumns are the columns of recomputations, the stored minutes the attribution
// service owes a recomputation of: a record's states (node ”) and its progress by node.
var RecomputationColumns = []string{"id", "node", "reason", "what", "nodes", "from_ns", "to_ns", "next_ns", "updated_ns"}

// SchemaMigrationColumns are the columns of schema_migrations, one row per applied migration.
var SchemaMigrationColumns = []string{"version", "name", "applied_at"}

// Columns maps every table to its columns, in the order DESCRIBE TABLE lists them.
func Columns() map[string][]string {
	return map[string][]string{
		Samples: SampleColumns, Samples1s: RollupColumns, Samples1m: RollupColumns, Allocations: AllocationColumns,
		AttributionMinutes: AttributionMinuteColumns, SchemaMigrations: SchemaMigrationColumns,
		BillingPeriods: BillingPeriodColumns, BillingPeriodLines: BillingPeriodLineColumns,
		AllocationAudit: AllocationAuditColumns, AttributionHours: AttributionHourColumns,
		AttributionHosts: AttributionHostColumns,
		FleetHours:       FleetHourColumns,
		FleetHourGPUs:    FleetHourGPUColumns, PriceBooks: PriceBookColumns,
		Recomputations: RecomputationColumns,
	}
}

// List is columns as SQL lists them: "a, b, c".
func List(columns []string) string { return strings.Join(columns, ", ") }

// Insert is the INSERT of columns into table, with the explicit column list ClickHouse 18.16
// needs (a later migration may add columns, and positional inserts would shift).
func Insert(table string, columns []string) string {
	return "INSERT INTO " + table + " (" + List(columns) + ")"
}
