// Package focustest holds the checks of a FOCUS file that the tests of every package that
// writes one share: the FOCUS 1.2 rules that the FinOps Foundation's validator (1.0.0, FOCUS
// 1.0 rules) does not know.
package focustest

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
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

// The FOCUS 1.3 rules Check13 checks, quoted from the specification's text (Cost and Usage
// dataset, version 1.3; FinOps-Open-Cost-and-Usage-Spec/FOCUS_Spec), beyond Check12's:
//
//   - ServiceProviderName: "The Service Provider column MUST be present in a FOCUS dataset."
//     "This column MUST be of type String and MUST NOT contain null values."
//   - HostProviderName: "The HostProvider column MUST be present in a FOCUS dataset" (1.3's
//     column table: Mandatory, Allows nulls False); "For Service Providers that DO NOT allow
//     their customer to select or know the host provider where resources or services are
//     deployed, this SHOULD be the name of the Service Provider".
//   - ProviderName and PublisherName: "Provider - DEPRECATED" and "Publisher - DEPRECATED",
//     still "Mandatory" and "Allows nulls False" in 1.3's column table.
//   - AllocatedMethodId: "AllocatedMethodId MUST be null when a charge is not related to a
//     provider-calculated split cost allocation." "AllocatedMethodId MUST NOT be null when a
//     charge is related to a provider-calculated split cost allocation." "Provider
//     documentation of a split cost allocation method MUST make reference to a single
//     AllocatedMethodId value." (one of the documented methods, focus.AllocatedMethod).
//   - AllocatedMethodDetails: "AllocatedMethodDetails MUST be of type JSON Object";
//     "AllocatedMethodDetails MUST be null when a charge is not related to a data
//     generator-calculated split cost allocation."; "a valid JSON object with a top level key
//     of Elements containing an Array of entry objects"; AllocatedRatio is "Numeric",
//     "Required True"; "UsageUnit ... must be present if Usage Quantity is provided"; "Custom
//     keys must be prefixed with "x_""; "AllocatedRatio MUST represent the allocated charge's
//     percentage of the origin charge" (here the billed fraction, x_BilledFraction, in
//     (0, 1]; and slicemeter's own rule AllocatedRatio × UsageQuantity = PricingQuantity).
//   - AllocatedResourceId: "AllocatedResourceId MUST be null when a charge is not related to a
//     provider-calculated split cost allocation." "AllocatedResourceId MUST NOT be null when a
//     charge represents the allocated portion of the origin charge." (and ResourceId is the
//     instance, which the physical GPU holds: AllocatedResourceId is ResourceId's GPU).
//   - AllocatedTags: "AllocatedTags MUST be of type JSON Object"; "AllocatedTags MUST be null
//     when a charge is not related to a data generator-calculated split cost allocation.";
//     "AllocatedTags MUST NOT include resource tags already present in Tags."; "Data
//     generator-defined tag keys MUST be prefixed with a predetermined, data
//     generator-specified tag key prefix".
//
// Not checked, because slicemeter does not meet it: "The sum of ...AllocatedRatio across all
// allocated charges related to a single origin charge MUST be equal to 1 (100%)." The
// unallocated share of a GPU is billed to nobody and has no row (attribution/README.md,
// "FOCUS export"), so a GPU's ratios sum to at most 1.

// Check13 checks the FOCUS 1.3 rules above, and Check12's, on a CSV file's rows (header
// first).
func Check13(t testing.TB, rows [][]string) {
	t.Helper()
	Check12(t, rows)
	col := map[string]int{}
	for i, c := range rows[0] {
		col[c] = i
	}
	for _, c := range []string{"ServiceProviderName", "HostProviderName", "ProviderName", "PublisherName", "AllocatedMethodId",
		"AllocatedMethodDetails", "AllocatedResourceId", "AllocatedResourceName", "AllocatedTags"} {
		if _, ok := col[c]; !ok {
			t.Fatalf("FOCUS 1.3 column %s missing from %v", c, rows[0])
		}
	}
	methods := []string{focus.MethodMIG, focus.MethodVGPU, focus.MethodShare, focus.MethodWhole}
	for _, r := range rows[1:] {
		get := func(c string) string { return r[col[c]] }
		for _, c := range []string{"ServiceProviderName", "HostProviderName", "ProviderName", "PublisherName"} {
			if get(c) == "" {
				t.Errorf("%s null: %v", c, r)
			}
		}
		if get("HostProviderName") != get("ServiceProviderName") {
			t.Errorf("HostProviderName %q, ServiceProviderName %q: slicemeter's customer cannot choose a host", get("HostProviderName"), get("ServiceProviderName"))
		}
		split := get("ChargeClass") != "Correction" // every Usage row is a GPU's share
		if !split {
			for _, c := range []string{"AllocatedMethodId", "AllocatedMethodDetails", "AllocatedResourceId", "AllocatedResourceName", "AllocatedTags"} {
				if get(c) != "" {
					t.Errorf("%s %q on a charge that is no split cost allocation", c, get(c))
				}
			}
			continue
		}
		if !slices.Contains(methods, get("AllocatedMethodId")) {
			t.Errorf("AllocatedMethodId %q: expected one of %v", get("AllocatedMethodId"), methods)
		}
		if id := get("AllocatedResourceId"); id == "" || get("AllocatedResourceName") == "" ||
			!(get("ResourceId") == id || strings.HasPrefix(get("ResourceId"), id+"/")) {
			t.Errorf("AllocatedResourceId %q, AllocatedResourceName %q: expected the GPU of ResourceId %q", id, get("AllocatedResourceName"), get("ResourceId"))
		}
		checkDetails(t, get("AllocatedMethodDetails"), get("x_BilledFraction"), get("PricingQuantity"))
		var tags, allocated map[string]any
		if err := json.Unmarshal([]byte(get("Tags")), &tags); err != nil {
			t.Errorf("Tags %q: %v", get("Tags"), err)
		}
		if err := json.Unmarshal([]byte(get("AllocatedTags")), &allocated); err != nil || allocated == nil {
			t.Errorf("AllocatedTags %q: not a JSON object (%v)", get("AllocatedTags"), err)
		}
		for k := range allocated {
			if _, ok := tags[k]; ok {
				t.Errorf("AllocatedTags key %q is in Tags too", k)
			}
			if !strings.HasPrefix(k, focus.TagPrefix) {
				t.Errorf("AllocatedTags key %q: not under the prefix %q", k, focus.TagPrefix)
			}
		}
	}
}

// checkDetails checks an AllocatedMethodDetails cell of a Usage row.
func checkDetails(t testing.TB, cell, fraction, quantity string) {
	t.Helper()
	var d map[string]json.RawMessage
	if err := json.Unmarshal([]byte(cell), &d); err != nil || d == nil {
		t.Errorf("AllocatedMethodDetails %q: not a JSON object (%v)", cell, err)
		return
	}
	var elements []map[string]any
	if err := json.Unmarshal(d["Elements"], &elements); err != nil || len(elements) == 0 {
		t.Errorf("AllocatedMethodDetails %q: no Elements array of objects (%v)", cell, err)
		return
	}
	for k := range d {
		if k != "Elements" && !strings.HasPrefix(k, "x_") {
			t.Errorf("AllocatedMethodDetails key %q: neither FOCUS's nor x_", k)
		}
	}
	for _, e := range elements {
		ratio, ok := e["AllocatedRatio"].(float64)
		if !ok || ratio <= 0 || ratio > 1 {
			t.Errorf("AllocatedMethodDetails %q: AllocatedRatio %v, expected a number in (0, 1]", cell, e["AllocatedRatio"])
			continue
		}
		if f, err := strconv.ParseFloat(fraction, 64); err != nil || math.Abs(f-ratio) > 1e-12 {
			t.Errorf("AllocatedRatio %v, x_BilledFraction %q", ratio, fraction)
		}
		q, hasQ := e["UsageQuantity"].(float64)
		if _, hasUnit := e["UsageUnit"].(string); hasQ && !hasUnit {
			t.Errorf("AllocatedMethodDetails %q: UsageQuantity without UsageUnit", cell)
		}
		if p, err := strconv.ParseFloat(quantity, 64); hasQ && (err != nil || math.Abs(ratio*q-p) > 1e-9*math.Max(1, p)) {
			t.Errorf("AllocatedRatio %v × UsageQuantity %v, PricingQuantity %q", ratio, q, quantity)
		}
		for k := range e {
			if k != "AllocatedRatio" && k != "UsageUnit" && k != "UsageQuantity" && !strings.HasPrefix(k, "x_") {
				t.Errorf("AllocatedMethodDetails element key %q: neither FOCUS's nor x_", k)
			}
		}
	}
}

// The FOCUS 1.3 metadata rules CheckMetadata13 checks, quoted from the specification's text
// (Metadata, Recency, version 1.3):
//
//   - "RecencyLastUpdated MUST be present in the metadata." "RecencyLastUpdated MUST be of type
//     Date/Time." "RecencyLastUpdated MUST NOT be null."
//   - "DatasetInstanceId MUST be present in an object within the Recency collection."
//     "DatasetInstanceId MUST NOT be null."; and "Recency object MUST be associated with one
//     and only one DatasetInstance object."
//   - "DatasetInstanceLastUpdated MUST be present in an object within the Recency collection."
//     "DatasetInstanceLastUpdated MUST conform to DateTimeFormat requirements."
//   - "TimeSectors MUST be present in an object within the Recency collection when the the
//     associated FOCUS dataset is defined as a time series dataset." "TimeSectors collection
//     MUST contain at least one object."
//   - "TimeSectorComplete MUST be present in the TimeSectors subsection" "TimeSectorComplete
//     MUST be of type Boolean." (each sector's value must be complete: the caller says whether
//     its periods are closed).
//
// A metadata without Recency (the API's, "Recency MAY be present in the Metadata") is passed
// with wantRecency false.
func CheckMetadata13(t testing.TB, data []byte, wantRecency bool, complete bool) {
	t.Helper()
	var m struct {
		Schema struct {
			FocusVersion string
		}
		DatasetInstance []struct{ DatasetInstanceId string }
		Recency         []map[string]json.RawMessage
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("FOCUS metadata %s: %v", data, err)
	}
	if m.Schema.FocusVersion != string(focus.Focus13) {
		t.Errorf("FocusVersion %q", m.Schema.FocusVersion)
	}
	if len(m.DatasetInstance) != 1 || m.DatasetInstance[0].DatasetInstanceId == "" {
		t.Errorf("DatasetInstance %v", m.DatasetInstance)
	}
	if !wantRecency {
		return
	}
	if len(m.Recency) != 1 {
		t.Fatalf("Recency %v: expected one object, of the one dataset instance", m.Recency)
	}
	r := m.Recency[0]
	var id string
	if err := json.Unmarshal(r["DatasetInstanceId"], &id); err != nil || len(m.DatasetInstance) != 1 || id != m.DatasetInstance[0].DatasetInstanceId {
		t.Errorf("Recency's DatasetInstanceId %s: not the DatasetInstance's", r["DatasetInstanceId"])
	}
	for _, k := range []string{"RecencyLastUpdated", "DatasetInstanceLastUpdated"} {
		var s string
		if err := json.Unmarshal(r[k], &s); err != nil || !dateTime.MatchString(s) {
			t.Errorf("%s %s: expected YYYY-MM-DDTHH:mm:ssZ", k, r[k])
		}
	}
	var sectors []map[string]any
	if err := json.Unmarshal(r["TimeSectors"], &sectors); err != nil || len(sectors) == 0 {
		t.Fatalf("TimeSectors %s: expected at least one object (%v)", r["TimeSectors"], err)
	}
	for _, s := range sectors {
		c, ok := s["TimeSectorComplete"].(bool)
		if !ok || c != complete {
			t.Errorf("TimeSectorComplete %v, want %v", s["TimeSectorComplete"], complete)
		}
		for _, k := range []string{"TimeSectorStart", "TimeSectorEnd", "TimeSectorLastUpdated"} {
			if v, _ := s[k].(string); !dateTime.MatchString(v) {
				t.Errorf("%s %v: expected YYYY-MM-DDTHH:mm:ssZ", k, s[k])
			}
		}
	}
}

// CheckMoneyDigits fails each money cell (the columns named) of a CSV file's rows (header
// first) that has more decimal places than scale, or is no plain decimal: money is printed
// from a Decimal at the contract's scale, never with a float's noise.
func CheckMoneyDigits(t testing.TB, rows [][]string, scale int, columns ...string) {
	t.Helper()
	for _, c := range columns {
		i := slices.Index(rows[0], c)
		if i < 0 {
			t.Fatalf("money column %s missing from %v", c, rows[0])
		}
		for _, r := range rows[1:] {
			if err := MoneyDigits(r[i], scale); err != nil {
				t.Errorf("%s: %v", c, err)
			}
		}
	}
}

var plainDecimal = regexp.MustCompile(`^-?\d+(\.\d+)?$`)

// MoneyDigits says what is wrong with an amount printed as v, if it has more decimal places
// than scale or is no plain decimal; empty (null) is fine.
func MoneyDigits(v string, scale int) error {
	if v == "" || v == "null" {
		return nil
	}
	if !plainDecimal.MatchString(v) {
		return fmt.Errorf("%q: not a plain decimal", v)
	}
	if _, frac, ok := strings.Cut(v, "."); ok && len(frac) > scale {
		return fmt.Errorf("%q: %d decimal places, more than the scale %d", v, len(frac), scale)
	}
	return nil
}
