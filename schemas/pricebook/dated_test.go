package pricebook

import (
	"math"
	"strings"
	"testing"
	"time"
)

const datedBook = `version: 1
currency: USD
prices: {A100-SXM4-40GB: 1.60, H100-SXM5-80GB: 2.40}
tiers: {pro: 1.0, budget: 0.5}
contracts: {acme: {H100-SXM5-80GB: 2.00}}
changes:
  - effective: "2026-01-15T12:00:00Z"
    prices: {A100-SXM4-40GB: 3.20}
  - effective: 2026-01-20T00:00:00Z
    contracts: {acme: {A100-SXM4-40GB: 1.00}}
`

func TestCostsBetween(t *testing.T) {
	book, err := Parse("dated.yaml", []byte(datedBook))
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	tests := []struct {
		name                string
		tenant, tier, model string
		fraction            float64
		from, to            string
		wantList, wantCost  float64
	}{
		{"before the change", "beta", "pro", "A100-SXM4-40GB", 1, "2026-01-15T10:00:00Z", "2026-01-15T12:00:00Z", 3.2, 3.2},
		// One hour each side of the change, split to the second.
		{"across the change", "beta", "budget", "A100-SXM4-40GB", 1, "2026-01-15T11:00:00Z", "2026-01-15T13:00:00Z", 1.6 + 3.2, (1.6 + 3.2) * 0.5},
		{"one second after", "beta", "pro", "A100-SXM4-40GB", 1, "2026-01-15T11:59:59Z", "2026-01-15T12:00:01Z", (1.6 + 3.2) / 3600, (1.6 + 3.2) / 3600},
		{"contract replaces tier", "acme", "budget", "H100-SXM5-80GB", 0.25, "2026-01-05T00:00:00Z", "2026-01-05T02:00:00Z", 2 * 2.4 * 0.25, 2 * 2.0 * 0.25},
		{"contract from a change", "acme", "pro", "A100-SXM4-40GB", 1.0 / 7, "2026-01-19T23:00:00Z", "2026-01-20T01:00:00Z", 2 * 3.2 / 7, (3.2 + 1.0) / 7},
		{"other tenant no contract", "beta", "pro", "H100-SXM5-80GB", 1, "2026-01-05T00:00:00Z", "2026-01-05T01:00:00Z", 2.4, 2.4},
		{"list only", "", "", "A100-SXM4-40GB", 1, "2026-01-15T11:30:00Z", "2026-01-15T12:30:00Z", 0.8 + 1.6, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list, cost, err := book.CostsBetween(tt.tenant, tt.tier, tt.model, tt.fraction, at(tt.from), at(tt.to))
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(list-tt.wantList) > 1e-9 || math.Abs(cost-tt.wantCost) > 1e-9 {
				t.Errorf("list, cost = %.9f, %.9f; want %.9f, %.9f", list, cost, tt.wantList, tt.wantCost)
			}
		})
	}
	if _, _, err := book.CostsBetween("acme", "pro", "L40S", 1, at("2026-01-05T00:00:00Z"), at("2026-01-05T01:00:00Z")); err == nil || !strings.Contains(err.Error(), `"L40S"`) {
		t.Errorf("unpriced model: %v", err)
	}
	if !book.Dated() {
		t.Error("Dated() = false for a book with changes")
	}
}

// A book without contracts or changes prices exactly as ListCost × multiplier.
func TestCostsBetweenUndated(t *testing.T) {
	book, err := Load(publicBook)
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 1, 5, 0, 0, 12, 0, time.UTC)
	to := from.Add(3588 * time.Second)
	list, cost, err := book.CostsBetween("acme", "budget", "A100-SXM4-40GB", 1.0/7, from, to)
	if err != nil || list != ListCost(1.6, 1.0/7, to.Sub(from)) || cost != list*0.7 || book.Dated() {
		t.Errorf("list, cost, err = %v, %v, %v", list, cost, err)
	}
}

func TestParseDatedErrors(t *testing.T) {
	const base = "version: 1\ncurrency: USD\nprices: {A100-SXM4-40GB: 1.60}\ntiers: {pro: 1.0}\n"
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"contract for unpriced model", base + "contracts: {acme: {L40S: 1}}\n", []string{"contracts.acme.L40S: model not in prices"}},
		{"contract price negative", base + "contracts: {acme: {A100-SXM4-40GB: -1}}\n", []string{"p.yaml:5", `contracts.acme.A100-SXM4-40GB: "-1"`}},
		{"changes not a list", base + "changes: {a: 1}\n", []string{"changes: a mapping", "a list of changes"}},
		{"change without effective", base + "changes: [{prices: {A100-SXM4-40GB: 2}}]\n", []string{"changes[0].effective: missing"}},
		{"change bad effective", base + "changes: [{effective: tomorrow, prices: {A100-SXM4-40GB: 2}}]\n", []string{"p.yaml:5", `changes[0].effective: "tomorrow"`, "RFC 3339"}},
		{"change effective in 2610", base + "changes: [{effective: \"2610-08-01T00:00:00Z\", prices: {A100-SXM4-40GB: 2}}]\n", []string{"p.yaml:5", `changes[0].effective: "2610-08-01T00:00:00Z"`, "2106-02-07T06:28:15Z"}},
		{"change effective in 1999", base + "changes: [{effective: 1999-12-31T00:00:00Z, prices: {A100-SXM4-40GB: 2}}]\n", []string{`changes[0].effective: "1999-12-31T00:00:00Z"`, "2000-01-01T00:00:00Z"}},
		{"change unpriced model", base + "changes: [{effective: \"2026-01-01T00:00:00Z\", prices: {L40S: 2}}]\n", []string{"changes[0].prices.L40S: model not in prices"}},
		{"change unknown field", base + "changes: [{effective: \"2026-01-01T00:00:00Z\", tiers: {pro: 2}}]\n", []string{"changes[0].tiers: unknown field"}},
		{"jitter limit for unknown tier", base + "sla: {jitter_p99: {gold: 5ms}}\n", []string{"sla.jitter_p99.gold", `tier "gold" is not in tiers`}},
		{"jitter limit not a duration", base + "sla: {jitter_p99: {pro: fast}}\n", []string{`sla.jitter_p99.pro: "fast"`, "such as 5ms"}},
		{"sla unknown", base + "sla: {uptime: {pro: 1}}\n", []string{"sla.uptime: unknown field", "cold_start or jitter_p99"}},
		{"two changes at once", base + "changes: [{effective: \"2026-01-01T00:00:00Z\"}, {effective: \"2026-01-01T00:00:00Z\"}]\n", []string{"changes[1].effective", "changes[0] has it"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(tt.yaml))
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v should contain %q", err, w)
				}
			}
		})
	}
}

func TestCheckModels(t *testing.T) {
	book, err := Load(publicBook)
	if err != nil {
		t.Fatal(err)
	}
	if err := book.CheckModels([]string{"A100-SXM4-40GB", "H100-SXM5-80GB"}); err != nil {
		t.Errorf("priced fleet: %v", err)
	}
	err = book.CheckModels([]string{"A100-SXM4-40GB", "L40S", "B200", "L40S"})
	if err == nil || !strings.Contains(err.Error(), `["B200" "L40S"]`) {
		t.Errorf("unpriced fleet: %v", err)
	}
}

func TestParseJitterLimit(t *testing.T) {
	book, err := Parse("p.yaml", []byte("version: 1\ncurrency: USD\nprices: {A100-SXM4-40GB: 1.60}\ntiers: {pro: 1.0, budget: 0.5}\nsla: {cold_start: {pro: 20s}, jitter_p99: {pro: 5ms}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if book.JitterP99["pro"] != 5*time.Millisecond || len(book.JitterP99) != 1 || book.ColdStartSLA("pro") != 20*time.Second {
		t.Errorf("sla: jitter %v, cold start %v", book.JitterP99, book.ColdStart)
	}
}
