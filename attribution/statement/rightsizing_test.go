package statement

import (
	"bytes"
	"context"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/attribution/advice"
)

// TestRightSizingSection: the statement asks the source for its tenant's advice over the
// period so far and lists the downsizes with their savings and total, and the saturated
// allocations; without advice there is no section.
func TestRightSizingSection(t *testing.T) {
	f := newFixture(3)
	src := f.source()
	var asked []any
	src.Advice = func(_ context.Context, tenant string, from, to time.Time) (advice.Result, error) {
		asked = []any{tenant, from, to}
		return advice.Result{From: from, To: to, Currency: "USD", Rows: []advice.Row{
			{AllocationID: "w1", Tenant: tenant, Node: "node-o", InstanceID: "gpu1", Shape: "gpu", AdvisedShape: "1g.5gb", Action: advice.Downsize,
				ComputeNeed: 0.1, MemoryNeed: 4 << 30, Fraction: big.NewRat(1, 1), AdvisedFraction: big.NewRat(1, 7),
				Savings: decimal.RequireFromString("0.928"), Savings30d: decimal.RequireFromString("668.16")},
			{AllocationID: "m1", Tenant: tenant, Node: "node-o", InstanceID: "gpu0/mig0", Shape: "3g.20gb", AdvisedShape: "2g.10gb", Action: advice.Downsize,
				ComputeNeed: 0.1167, MemoryNeed: 4 << 30, Fraction: big.NewRat(3, 7), AdvisedFraction: big.NewRat(2, 7),
				Savings: decimal.RequireFromString("0.225714285714"), Savings30d: decimal.RequireFromString("162.514285714286")},
			{AllocationID: "v1", Tenant: tenant, Node: "vh-a", InstanceID: "gpu0/vgpu0", Shape: "H100-40C", AdvisedShape: "H100-40C", Action: advice.Keep,
				Saturated: true, ComputeNeed: 1, Fraction: big.NewRat(1, 2), AdvisedFraction: big.NewRat(1, 2)},
		}}, nil
	}
	st, err := Build(context.Background(), src, "acme", november, now)
	if err != nil {
		t.Fatal(err)
	}
	start, end := november.Bounds(time.UTC)
	if asked[0] != "acme" || !asked[1].(time.Time).Equal(start) || !asked[2].(time.Time).Equal(minTime(end, now)) {
		t.Errorf("advice asked for %v; want acme over the period up to now", asked)
	}
	var b bytes.Buffer
	if err := Render(&b, st); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		"<h2>Right-sizing</h2>",
		`<tr><td>w1</td><td>node-o / gpu1</td><td>gpu</td><td>1g.5gb</td><td class="n">0.1000</td><td class="n">4.00</td><td class="n">0.928000</td><td class="n">668.160000</td></tr>`,
		`id="right-sizing-savings">1.153714<`, // 0.928 + 0.225714285714
		`<tr class="breach"><td>v1</td><td>vh-a / gpu0/vgpu0</td><td>H100-40C</td><td class="n">1.0000</td></tr>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(page, "<td>v1</td><td>vh-a / gpu0/vgpu0</td><td>H100-40C</td><td>") {
		t.Error("a kept allocation is listed as a downsize")
	}
	src.Advice = nil
	st, err = Build(context.Background(), src, "acme", november, now)
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := Render(&b, st); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "Right-sizing") {
		t.Error("a statement without advice has a right-sizing section")
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
