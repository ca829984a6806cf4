// Package focustest holds the checks of a FOCUS file that the tests of every package that
// writes one share: the FOCUS 1.2 rules that the FinOps Foundation's validator (1.0.0, FOCUS
// 1.0 rules) does not know.
package focustest

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/focus"
)

var dateTime = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)

// Check12 checks the FOCUS 1.2 rules that focus-validator 1.0.0 does not know, on a CSV
// file's rows (header first).
func Check12(t testing.TB, rows [][]string) {
	t.Helper()
	col := map[string]int{}
	for i, c := range rows[0] {
		col[c] = i
	}
	num := func(r []string, c string) float64 {
		v, err := strconv.ParseFloat(r[col[c]], 64)
		if err != nil {
			t.Fatalf("%s %q: %v", c, r[col[c]], err)
		}
		return v
	}
	for _, r := range rows[1:] {
		get := func(c string) string { return r[col[c]] }
		if get("InvoiceId") == "" {
			t.Errorf("row without InvoiceId: %v", r)
		}
		correction := get("ChargeClass") == "Correction"
		if c := get("ChargeClass"); c != "" && !correction {
			t.Errorf("ChargeClass %q", c)
		}
		if get("PricingCurrency") == "" || get("PricingCurrency") != get("BillingCurrency") {
			t.Errorf("PricingCurrency %q, BillingCurrency %q", get("PricingCurrency"), get("BillingCurrency"))
		}
		for _, c := range []string{"BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd"} {
			if !dateTime.MatchString(get(c)) {
				t.Errorf("%s %q: expected YYYY-MM-DDTHH:mm:ssZ", c, get(c))
			}
		}
		// FOCUS 1.2's ServiceSubcategory: one of its ServiceCategory's values.
		if get("ServiceCategory") != "AI and Machine Learning" || get("ServiceSubcategory") != focus.ServiceSubcategory {
			t.Errorf("ServiceCategory %q, ServiceSubcategory %q", get("ServiceCategory"), get("ServiceSubcategory"))
		}
		if get("ChargePeriodStart") >= get("ChargePeriodEnd") || get("BillingPeriodStart") >= get("BillingPeriodEnd") {
			t.Errorf("empty period: %v", r)
		}
		if correction {
			continue
		}
		if get("PricingUnit") != "GPU-Hours" || get("ConsumedUnit") != "Seconds" {
			t.Errorf("PricingUnit %q, ConsumedUnit %q", get("PricingUnit"), get("ConsumedUnit"))
		}
		if get("SkuId") == "" || get("SkuPriceId") == "" || get("ResourceId") == "" {
			t.Errorf("Usage row without SkuId, SkuPriceId or ResourceId: %v", r)
		}
		// The charge period is the billed part of the hour, to whole seconds outwards.
		start, err1 := time.Parse(focus.DateTime, get("ChargePeriodStart"))
		end, err2 := time.Parse(focus.DateTime, get("ChargePeriodEnd"))
		if err1 != nil || err2 != nil {
			t.Fatalf("charge period: %v, %v", err1, err2)
		}
		if span, billed := end.Sub(start).Seconds(), num(r, "ConsumedQuantity"); span > 3600 || billed > span+1e-6 || span >= billed+2 {
			t.Errorf("charge period [%s, %s) for %v billed seconds", get("ChargePeriodStart"), get("ChargePeriodEnd"), billed)
		}
		q := num(r, "PricingQuantity")
		for _, p := range [][2]string{{"ListUnitPrice", "ListCost"}, {"ContractedUnitPrice", "ContractedCost"}} {
			if got, want := num(r, p[0])*q, num(r, p[1]); math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
				t.Errorf("%s × PricingQuantity = %v, %s %v", p[0], got, p[1], want)
			}
		}
		var tags map[string]any
		if err := json.Unmarshal([]byte(get("Tags")), &tags); err != nil {
			t.Errorf("Tags %q: %v", get("Tags"), err)
		}
		for k := range tags {
			if !strings.HasPrefix(k, focus.TagPrefix) {
				t.Errorf("tag %q: not under the metadata's ProviderTagPrefixes %q", k, focus.TagPrefix)
			}
		}
		var details map[string]any
		if err := json.Unmarshal([]byte(get("SkuPriceDetails")), &details); err != nil {
			t.Errorf("SkuPriceDetails %q: %v", get("SkuPriceDetails"), err)
		}
		for k := range details {
			if k != "GpuCount" && !strings.HasPrefix(k, "x_") {
				t.Errorf("SkuPriceDetails key %q: neither FOCUS's nor x_", k)
			}
		}
	}
}
