// Package stored is both sides of the attribution service's stored results: the minutes it
// attributes (attribution_minutes: WriteMinutes, and the reports read back from them,
// FromMinutes, HourlyLines), their hourly roll-up (attribution_hours, RollupHours), which
// minutes are attributed (CheckAttributed), the price books it attributed with, the
// recomputations it owes, and what replicas sharing the fleet by node need (shards.go).
// The SQL follows attribution/store's rules (its package comment).
package stored

import "github.com/slicemeter/slicemeter/attribution/internal/chquery"

// Querier is the part of a ClickHouse connection that reading needs (chquery.Querier).
type Querier = chquery.Querier
