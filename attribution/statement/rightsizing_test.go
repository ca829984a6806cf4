package statement

import (
	"bytes"
	"context"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/attribution/advice"
)

// adviceFixture is a tenant's advice: two downsizes and a saturated vGPU that keeps its shape.
func adviceFixture(_ context.Context, tenant string, from, to time.Time) (advice.Result, error) {
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

// rightSizingRows are what the page of a statement with adviceFixture's advice shows.
var rightSizingRows = []string{
	"<h2>Right-sizing</h2>",
	`<tr><td>w1</td><td>node-o / gpu1</td><td>gpu</td><td>1g.5gb</td><td class="n">0.1000</td><td class="n">4.00</td><td class="n">0.928000</td><td class="n">668.160000</td></tr>`,
	`id="right-sizing-savings">1.153714<`, // 0.928 + 0.225714285714
	`<tr class="breach"><td>v1</td><td>vh-a / gpu0/vgpu0</td><td>H100-40C</td><td class="n">1.0000</td></tr>`,
}

// rightSizingPage renders acme's November with the advice fixture (or none).
func rightSizingPage(t *testing.T, withAdvice bool, asked *[]any) string {
	t.Helper()
	src := newFixture(3).source()
	if withAdvice {
		src.Advice = func(ctx context.Context, tenant string, from, to time.Time) (advice.Result, error) {
			*asked = []any{tenant, from, to}
			return adviceFixture(ctx, tenant, from, to)
		}
	}
	st, err := Build(context.Background(), src, "acme", november, now)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Render(&b, st); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestRightSizingSection: the statement asks the source for its tenant's advice over the
// period so far and lists the downsizes with their savings and total, and the saturated
// allocations; without advice there is no section.
func TestRightSizingSection(t *testing.T) {
	var asked []any
	page := rightSizingPage(t, true, &asked)
	start, end := november.Bounds(time.UTC)
	if len(asked) != 3 || asked[0] != "acme" || !asked[1].(time.Time).Equal(start) || !asked[2].(time.Time).Equal(minTime(end, now)) {
		t.Errorf("advice asked for %v; want acme over the period up to now", asked)
	}
	for _, want := range rightSizingRows {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(page, "<td>v1</td><td>vh-a / gpu0/vgpu0</td><td>H100-40C</td><td>") {
		t.Error("a kept allocation is listed as a downsize")
	}
	if strings.Contains(rightSizingPage(t, false, nil), "Right-sizing") {
		t.Error("a statement without advice has a right-sizing section")
	}
}

// TestRightSizingInBrowser: headless Chromium lays the section out as rendered (the DOM it
// dumps holds its rows and total) and prints the page to PDF.
func TestRightSizingInBrowser(t *testing.T) {
	needChromium(t)
	var asked []any
	path := filepath.Join(t.TempDir(), "statement.html")
	if err := os.WriteFile(path, []byte(rightSizingPage(t, true, &asked)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dom, err := Headless(ctx, path, "--dump-dom")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range rightSizingRows {
		if !bytes.Contains(dom, []byte(want)) {
			t.Errorf("the browser's DOM lacks %q", want)
		}
	}
	pdf := filepath.Join(t.TempDir(), "statement.pdf")
	if err := PDF(ctx, path, pdf); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(pdf); !bytes.HasPrefix(b, []byte("%PDF-")) {
		t.Errorf("the PDF does not start with %%PDF-: %.20q", b)
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
