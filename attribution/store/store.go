// Package store is attribution's ClickHouse side: every query that reads the samples, their
// rollups and the allocations for a report (one file per table or concern), the presence of
// the GPUs (the capacity), the fleet's models, the noisy-neighbour signal, and both sides of
// attribution_minutes (the service's writer and the report's reader).
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

import (
	"context"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution/billing"
)

// Querier is the part of a ClickHouse connection that reading needs.
type Querier interface {
	Query(ctx context.Context, query string, args ...any) (driver.Rows, error)
}

// chunkSize bounds the targets per query of a list of targets, and the allocations of a chunk
// read without raising max_query_size (measure.go): each adds a few hundred bytes of query
// text and ClickHouse parses at most max_query_size (256 KiB by default).
const chunkSize = 400

// targetsTable is a set of targets, bound as two packed arrays (packStrings).
const targetsTable = `SELECT tn, ti FROM (SELECT ` + stringArray + ` AS tns, ` + stringArray + ` AS tis) ARRAY JOIN tns AS tn, tis AS ti`

func targetArrays(targets []billing.Target) (nodes, instances string) {
	var ns, is []string
	for _, t := range targets {
		ns = append(ns, t.Node)
		is = append(is, t.Instance)
	}
	return packStrings(ns), packStrings(is)
}

// Packed arrays: a chunk's arrays are bound as one string literal each, unpacked by the
// server, instead of one literal per element. ClickHouse 18.16 analyses a query in time that
// grows faster than its literals (10,000 allocations bound element by element took 20 s, and
// 20,000 exceed max_ast_elements); a few long strings parse like any literal.
//   - stringArray: the strings in hex, joined by ',' (packStrings): hex has no ',' to escape.
//   - intArray: decimal integers joined by ',' (packInts), as Int64; uintArray as UInt32.
const (
	stringArray = `arrayMap(x -> unhex(x), splitByChar(',', ?))`
	intArray    = `arrayMap(x -> toInt64(x), splitByChar(',', ?))`
	uintArray   = `arrayMap(x -> toUInt32(x), splitByChar(',', ?))`
)

func packStrings(ss []string) string {
	var b strings.Builder
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(hex.EncodeToString([]byte(s)))
	}
	return b.String()
}

func packInts[T int64 | uint32 | int](xs []T) string {
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(int64(x), 10))
	}
	return b.String()
}

// seconds is the whole second of a ns timestamp: the samples' time column, for partition pruning.
func seconds(ns int64) int64 { return ns / int64(time.Second) }

// dateTimeArg is seconds(ns) clamped to what a ClickHouse DateTime (UInt32 seconds) holds, for
// a toDateTime(?) bound of the time column: beyond it the server wraps the value around.
func dateTimeArg(ns int64) int64 {
	return min(max(floorTo(ns, int64(time.Second))/int64(time.Second), 0), math.MaxUint32)
}

// queryEach runs a query and calls each for every row it returns.
func queryEach(ctx context.Context, conn Querier, query string, args []any, each func(scan func(...any) error) error) error {
	rows, err := conn.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

// latest runs query, a SELECT count(), max(a DateTime), and returns the maximum, zero when
// the table is empty (max of nothing is 1970, not "none"); what says what is read.
func latest(ctx context.Context, conn driver.Conn, query, what string) (time.Time, error) {
	var n uint64
	var last time.Time
	if err := conn.QueryRow(ctx, query).Scan(&n, &last); err != nil {
		return time.Time{}, fmt.Errorf("read %s: %w", what, err)
	}
	if n == 0 {
		return time.Time{}, nil
	}
	return last.UTC(), nil
}
