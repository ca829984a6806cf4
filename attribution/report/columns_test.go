package report

import (
	"testing"
	"time"
)

// Every column of a row whose values are all known is filled: the cells are named after the
// header's columns, none left out and none misnamed (in panics).
func TestCellsFillEveryColumnByName(t *testing.T) {
	eff, d := 0.5, time.Second
	row := Row{Tenant: "acme", Tier: "pro", Efficiency: &eff, JitterP99: &d, ColdStartMax: &d, Currency: "USD"}
	c, err := row.cells()
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range Header() {
		if c[i].text == "" {
			t.Errorf("tenant row: column %s is empty", name)
		}
	}
	line := AllocationRow{Tenant: "acme", AllocationID: "a1", Tier: "pro", Node: "n1", Instance: "i1", Kind: "mig", Model: "A100",
		Profile: "1g.10gb", Efficiency: &eff, JitterP99: &d, ColdStart: &d, Currency: "USD"}
	c, err = line.cells()
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range AllocationHeader() {
		if c[i].text == "" {
			t.Errorf("line item: column %s is empty", name)
		}
	}
}

func TestColumnsRefuseAName(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a cell named after no column did not panic")
		}
	}()
	columns{"tenant": text("a"), "tennant": text("b")}.in(Header())
}
