package period

import (
	"context"
	"fmt"
	"io"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// PrintList writes the closed periods (List) to w, as WriteList does.
func PrintList(ctx context.Context, conn driver.Conn, w io.Writer) error {
	closed, err := List(ctx, conn)
	if err != nil {
		return err
	}
	return WriteList(w, closed)
}

// PrintReport writes the report closed for m to w byte for byte as it was stored; a month not
// closed is an error naming it.
func PrintReport(ctx context.Context, conn driver.Conn, m Month, w io.Writer) error {
	p, ok, err := Get(ctx, conn, m)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("billing period %s is not closed", m)
	}
	if _, err := w.Write(p.Report); err != nil {
		return fmt.Errorf("write the report of billing period %s: %w", m, err)
	}
	return nil
}
