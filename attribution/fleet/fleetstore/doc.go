// Package fleetstore is what the fleet report (attribution/fleet) reads of samples_1m, and
// its hourly roll-up (fleet_hours, fleet_hour_gpus) that the attribution service writes after
// each pass: the instances with their sums and facts, and the GPUs' presence. The SQL follows
// attribution/store's rules (its package comment).
package fleetstore
