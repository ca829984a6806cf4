package stored

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/schemas/tables"
)

// BookRecord is a row of price_books: a price book the attribution service started with, and
// how far the re-attribution of the stored minutes that its change made has come.
type BookRecord struct {
	Hash      string
	FirstSeen time.Time
	Book      []byte // pricebook.Canonical
	// Reprice is the minutes [From, To) to attribute again with the book; Next is how far
	// that has come (all zero: nothing to do).
	From, To, Next time.Time
	Reason         string // what differs, for logs
	Updated        time.Time
}

// Pending says whether minutes remain to be attributed again.
func (b BookRecord) Pending() bool { return b.Next.Before(b.To) }

// LatestBook is the state of the price book recorded last (ok false when none is).
func LatestBook(ctx context.Context, conn driver.Conn) (b BookRecord, ok bool, err error) {
	rows, err := conn.Query(ctx, `SELECT `+tables.List(tables.PriceBookColumns)+` FROM `+tables.PriceBooks+`
ORDER BY first_seen_ns DESC, updated_ns DESC LIMIT 1`)
	if err != nil {
		return b, false, fmt.Errorf("read the latest price book recorded: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		return b, false, rows.Err()
	}
	var (
		book           string
		seen, updated  uint64
		from, to, next int64
	)
	if err := rows.Scan(&b.Hash, &seen, &book, &from, &to, &next, &b.Reason, &updated); err != nil {
		return b, false, fmt.Errorf("read the latest price book recorded: %w", err)
	}
	b.Book, b.FirstSeen, b.Updated = []byte(book), unixNS(int64(seen)), unixNS(int64(updated))
	b.From, b.To, b.Next = unixNS(from), unixNS(to), unixNS(next)
	return b, true, rows.Err()
}

// unixNS is a ns timestamp as a time, zero for 0.
func unixNS(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// nsOf is a time as ns, 0 for zero.
func nsOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// RecordBook appends a state of a price book (a new book, or its re-attribution's progress).
func RecordBook(ctx context.Context, conn driver.Conn, b BookRecord) error {
	batch, err := conn.PrepareBatch(ctx, tables.Insert(tables.PriceBooks, tables.PriceBookColumns))
	if err != nil {
		return fmt.Errorf("prepare the record of price book %.12s: %w", b.Hash, err)
	}
	if err := batch.Append(b.Hash, uint64(nsOf(b.FirstSeen)), string(b.Book), nsOf(b.From), nsOf(b.To), nsOf(b.Next), b.Reason,
		uint64(nsOf(b.Updated))); err != nil {
		_ = batch.Abort()
		return fmt.Errorf("append the record of price book %.12s: %w", b.Hash, err)
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("record price book %.12s: %w", b.Hash, err)
	}
	return nil
}
