// Package chquery is the plumbing that attribution's ClickHouse readers share: the part of a
// connection they need, running a query row by row, binding long lists as packed arrays, and
// the bounds of the time columns. It knows no table.
package chquery

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

// ChunkSize bounds the targets per query of a list of targets, and the allocations of a chunk
// read without raising max_query_size (attribution/store's measure.go): each adds a few
// hundred bytes of query text and ClickHouse parses at most max_query_size (256 KiB by
// default).
const ChunkSize = 400

// TargetsTable is a set of targets, bound as two packed arrays (PackStrings).
const TargetsTable = `SELECT tn, ti FROM (SELECT ` + StringArray + ` AS tns, ` + StringArray + ` AS tis) ARRAY JOIN tns AS tn, tis AS ti`

// TargetArrays are targets' nodes and instances as TargetsTable's packed arrays.
func TargetArrays(targets []billing.Target) (nodes, instances string) {
	var ns, is []string
	for _, t := range targets {
		ns = append(ns, t.Node)
		is = append(is, t.Instance)
	}
	return PackStrings(ns), PackStrings(is)
}

// Packed arrays: a chunk's arrays are bound as one string literal each, unpacked by the
// server, instead of one literal per element. ClickHouse 18.16 analyses a query in time that
// grows faster than its literals (10,000 allocations bound element by element took 20 s, and
// 20,000 exceed max_ast_elements); a few long strings parse like any literal.
//   - StringArray: the strings in hex, joined by ',' (PackStrings): hex has no ',' to escape.
//   - IntArray: decimal integers joined by ',' (PackInts), as Int64; UintArray as UInt32.
const (
	StringArray = `arrayMap(x -> unhex(x), splitByChar(',', ?))`
	IntArray    = `arrayMap(x -> toInt64(x), splitByChar(',', ?))`
	UintArray   = `arrayMap(x -> toUInt32(x), splitByChar(',', ?))`
)

// PackStrings is a StringArray's argument.
func PackStrings(ss []string) string {
	var b strings.Builder
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(hex.EncodeToString([]byte(s)))
	}
	return b.String()
}

// PackInts is an IntArray's or UintArray's argument.
func PackInts[T int64 | uint32 | int](xs []T) string {
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(int64(x), 10))
	}
	return b.String()
}

// Seconds is the whole second of a ns timestamp: the samples' time column, for partition pruning.
func Seconds(ns int64) int64 { return ns / int64(time.Second) }

// DateTimeArg is Seconds(ns) clamped to what a ClickHouse DateTime (UInt32 seconds) holds, for
// a toDateTime(?) bound of the time column: beyond it the server wraps the value around.
func DateTimeArg(ns int64) int64 {
	return min(max(FloorTo(ns, int64(time.Second))/int64(time.Second), 0), math.MaxUint32)
}

// Each runs a query and calls each for every row it returns.
func Each(ctx context.Context, conn Querier, query string, args []any, each func(scan func(...any) error) error) error {
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

// Latest runs query, a SELECT count(), max(a DateTime), and returns the maximum, zero when
// the table is empty (max of nothing is 1970, not "none"); what says what is read.
func Latest(ctx context.Context, conn driver.Conn, query, what string) (time.Time, error) {
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

// FloorTo rounds ns down to a multiple of d.
func FloorTo(ns, d int64) int64 {
	r := ns % d
	if r < 0 {
		r += d
	}
	return ns - r
}

// HourOf is the UTC hour of a DateTime column, whatever the server's time zone.
func HourOf(column string) string {
	return "toDateTime(intDiv(toUInt32(" + column + "), 3600) * 3600)"
}

// HourWindow is the condition on an hourly roll-up's hour column of the hours of [from, to)
// (seconds).
const HourWindow = "hour >= toDateTime(?) AND hour < toDateTime(?)"
