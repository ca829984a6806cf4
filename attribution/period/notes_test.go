package period_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/period"
)

// TestCloseLogsNotes closes a month with an allocation on an instance never sampled and one
// of a tier the price book lacks: the stored report has no column for either, so the close
// logs the report's notes, once each, naming them.
func TestCloseLogsNotes(t *testing.T) {
	ctx := context.Background()
	conn := chtest.NewDatabase(t, nil)
	sampleMonths(t, conn, day(time.February, 1), day(time.February, 3))
	chtest.InsertAllocations(t, conn, []chtest.AllocationRow{
		{ID: "a1", Tenant: "acme", Tier: "pro", Node: "node-a", Instance: chtest.WholeA100.ID, Requested: day(time.February, 1), Started: day(time.February, 1), Ended: day(time.February, 2), Version: 1},
		{ID: "ghost-1", Tenant: "acme", Tier: "pro", Node: "node-a", Instance: "gpu7", Requested: day(time.February, 1), Started: day(time.February, 1), Ended: day(time.February, 2), Version: 1},
		{ID: "gold-1", Tenant: "beta", Tier: "gold-unpriced", Node: "node-a", Instance: chtest.MigA100.ID, Requested: day(time.February, 1), Started: day(time.February, 1), Ended: day(time.February, 2), Version: 1},
	})
	var log bytes.Buffer
	closer := period.Closer{Conn: conn, Book: chtest.Book(), Logger: slog.New(slog.NewTextHandler(&log, nil))}
	if _, err := closer.Close(ctx, feb, day(time.April, 5)); err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		if strings.Contains(line, `msg="attribution report note"`) {
			notes = append(notes, line)
		}
	}
	for _, want := range []string{"ghost-1", "gold-unpriced"} {
		n := 0
		for _, line := range notes {
			if strings.Contains(line, want) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d notes name %s, want 1; the close logged:\n%s", n, want, log.String())
		}
	}
}
