package period_test

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
)

// analystQuery is attribution/README.md's query of the line items from attribution_minutes, for February
// 2026.
func analystQuery(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "<!-- analyst-query -->\n```sql\n")
	q, _, ok2 := strings.Cut(after, "```")
	if !ok || !ok2 {
		t.Fatal("README.md has no analyst query")
	}
	return q
}

// TestAnalystQuery runs README.md's query over stored minutes that a naive sum over-counts
// (a day of February recomputed, with a new allocation in it, and a batch stored twice): it
// gives each allocation what the report from the stored minutes gives, on ClickHouse 18.16
// and on current ClickHouse (chDB).
func TestAnalystQuery(t *testing.T) {
	ctx := context.Background()
	conn := chtest.NewDatabase(t, nil)
	storeMinutes(t, conn, day(time.February, 1), day(time.March, 1), time.Time{}, time.Time{}, day(time.May, 1))
	storeMinutes(t, conn, day(time.February, 20), day(time.February, 21), day(time.February, 20), day(time.February, 21), day(time.May, 3))
	storeMinutes(t, conn, day(time.February, 5), day(time.February, 6), time.Time{}, time.Time{}, day(time.May, 1)) // sent twice
	q := analystQuery(t)
	rows, err := conn.Query(ctx, q)
	if err != nil {
		t.Fatalf("README's query: %v", err)
	}
	defer rows.Close()
	rep, lines, err := stored.FromMinutesLines(ctx, conn, day(time.February, 1), day(time.March, 1))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for i, l := range lines {
		want[l.Tenant+"/"+l.AllocationID] = i
	}
	n := 0
	for rows.Next() {
		var (
			tenant, id, tier, node, instance, model, profile string
			fraction, allocated, unmetered                   float64
			list, cost                                       decimal.Decimal
			overheadFraction, efficiency, overhead, waste    float64
		)
		if err := rows.Scan(&tenant, &id, &tier, &node, &instance, &model, &profile, &fraction, &allocated, &unmetered,
			&list, &cost, &overheadFraction, &efficiency, &overhead, &waste); err != nil {
			t.Fatal(err)
		}
		n++
		i, ok := want[tenant+"/"+id]
		if !ok {
			t.Errorf("README's query gives %s/%s, the report does not", tenant, id)
			continue
		}
		l := lines[i]
		for _, c := range []struct {
			name      string
			got, want float64
		}{
			{"allocated", allocated, l.Billed.Seconds()}, {"unmetered", unmetered, (l.Billed - l.Metered).Seconds()},
			{"list_cost", list.InexactFloat64(), l.ListCost}, {"cost", cost.InexactFloat64(), l.Cost},
			{"waste_cost", waste, l.WasteCost}, {"overhead_cost", overhead, l.OverheadCost}, {"efficiency", efficiency, l.Efficiency},
			{"billed_fraction", fraction, l.Fraction},
		} {
			if math.Abs(c.got-c.want) > 1e-9 {
				t.Errorf("%s/%s %s: README's query %v, the report %v", tenant, id, c.name, c.got, c.want)
			}
		}
		if model != l.Model || node != l.Node || instance != l.Instance || tier != l.Tier {
			t.Errorf("%s/%s: %s %s %s %s, the report's line %+v", tenant, id, model, node, instance, tier, l)
		}
	}
	if err := rows.Err(); err != nil || n != len(lines) || len(rep.Tenants) != 2 {
		t.Errorf("README's query: %d rows of the report's %d (%v)", n, len(lines), err)
	}
	// What the query is for: a plain sum counts the recomputed and the repeated days again.
	var naive decimal.Decimal
	if err := conn.QueryRow(ctx, `SELECT sum(cost) FROM attribution_minutes WHERE tenant = 'acme'
    AND minute >= toDateTime('2026-02-01 00:00:00') AND minute < toDateTime('2026-03-01 00:00:00')`).Scan(&naive); err != nil {
		t.Fatal(err)
	}
	if acme := rep.Tenants[0]; acme.Tenant != "acme" || naive.InexactFloat64() < acme.Cost*(1+1.5/28) {
		t.Errorf("a naive sum gives acme %s, the report %v: two days over-counted expected", naive, acme.Cost)
	}
	localtest.CheckQueriesWithChDB(t, "analyst.sql", []string{q})
}
