package focus

import (
	"math"
	"math/big"
	"strings"
	"testing"
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
