package focus

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/report"
)

// TestAppendMoneyIsDecimal: appendMoney prints what stored.Money's Decimal prints (with ".0"
// for a whole amount), ties and carries included, over amounts a bill has and edge cases.
func TestAppendMoneyIsDecimal(t *testing.T) {
	vals := []float64{0, 1, -1, 2.4, 1.5999999999999999, 0.21202777777777776, 2.3966666666666665, 0.0000000000005,
		-0.0000000000004, -0.0000000000005, 0.9999999999995, 9.9999999999999, 999999.9999999999, 0.1234567890125,
		1e-13, 12345678.123456789, 1e15 + 0.3, -3.14159265358979, 38.4, 1.6 / 7, 0.1 + 0.2, 1e21, 5e-324}
	for i := range 2000 {
		vals = append(vals, math.Sin(float64(i))*math.Pow(10, float64(i%9-3)), float64(i)/7, float64(i)*1.0000000000005e-9)
	}
	for _, v := range vals {
		d, _ := money(v)
		want := d.String()
		if !strings.Contains(want, ".") {
			want += ".0"
		}
		if got := string(appendMoney(nil, v)); got != want {
			t.Errorf("appendMoney(%v) = %s, the Decimal's %s", v, got, want)
		}
	}
	if got := appendMoney(nil, math.NaN()); len(got) != 0 {
		t.Errorf("NaN: %q, want null", got)
	}
}

// TestDecimalOf: the Parquet cell of an amount holds the Decimal's unscaled value, on the
// int64 path and the big one, negative ones in two's complement; floatOf reads it back.
func TestDecimalOf(t *testing.T) {
	for _, v := range []float64{0, 2.396666666667, -2.396666666667, 0.21202777777777776, 9.2e6, -9.2e6, 1e10, -1e10, 123456789012.5, -0.0000000000004} {
		cell, ok := decimalOf(v)
		d, _ := money(v)
		u := d.Shift(MoneyScale).BigInt()
		if u.Sign() < 0 {
			u.Add(u, new(big.Int).Lsh(big.NewInt(1), 8*decimalBytes))
		}
		var want decimalCell
		u.FillBytes(want[:])
		if !ok || cell != want {
			t.Errorf("decimalOf(%v) = %x, want %x", v, cell, want)
		}
		if back, _ := d.Float64(); floatOf(cell) != back {
			t.Errorf("floatOf(decimalOf(%v)) = %v, want %v", v, floatOf(cell), back)
		}
	}
}

// TestParquetRoundTrip: 3,000 distinct rows (more than a page; nulls and values in every
// optional column, negative and NaN money) written as Parquet in each version read back as
// the rows written: the rows are built from their cells, whose text the writer must copy.
func TestParquetRoundTrip(t *testing.T) {
	p := PeriodOf(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), time.UTC)
	var rows []Row
	for i := range 3000 {
		eff, cold := float64(i%100)/100, time.Duration(i)*time.Millisecond
		a := report.AllocationRow{Tenant: fmt.Sprintf("tenant-%d", i%7), AllocationID: fmt.Sprintf("a%d", i), Tier: "pro", Node: fmt.Sprintf("node-%d", i%13),
			Instance: fmt.Sprintf("gpu%d/mig%d", i%8, i%7), Kind: []string{"mig", "vgpu", "share", "gpu"}[i%4], Model: "A100-SXM4-40GB",
			Fraction: 1 / float64(1+i%7), Allocated: time.Duration(i+1) * time.Second, ListCost: float64(i) / 3, Cost: float64(i) / 7,
			WasteCost: -float64(i) / 11, Currency: "USD", WindowStart: p.Start, WindowEnd: p.Start.Add(time.Hour)}
		if i%3 == 0 {
			a.Efficiency, a.ColdStart = &eff, &cold
		}
		if i%5 == 0 {
			a.OverheadCost = math.NaN()
		}
		rows = append(rows, Usage(a, p, DefaultIssuer))
		if i%10 == 0 {
			rows = append(rows, Correction(report.Row{Tenant: "acme", Tier: "pro", Currency: "USD", Cost: float64(i) / 9}, p, p, DefaultIssuer))
		}
	}
	for _, v := range []Version{Focus12, Focus13} {
		var b bytes.Buffer
		w, err := v.NewWriter(&b, Parquet)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if err := w.Write(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		back, err := ReadParquet(bytes.NewReader(b.Bytes()), int64(b.Len()))
		if err != nil || len(back) != len(rows) {
			t.Fatalf("%s: %d rows read back (%v), %d written", v, len(back), err, len(rows))
		}
		for i := range rows {
			want := rows[i]
			if math.IsNaN(want.XOverheadCost) { // a required money column holds 0 for NaN
				want.XOverheadCost = 0
			}
			if got, w := v.Cells(back[i]), v.Cells(want); !slices.Equal(got, w) {
				t.Fatalf("%s row %d:\n%v\nwritten\n%v", v, i, got, w)
			}
		}
	}
}
