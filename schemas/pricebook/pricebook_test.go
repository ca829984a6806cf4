package pricebook

import (
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// publicBook is the public scenarios' price book (README.md), kept beside the command that the
// commands' tests run.
const publicBook = "../../attribution/pricebook/testdata/prices.yaml"

func TestLoad(t *testing.T) {
	book, err := Load(publicBook)
	if err != nil {
		t.Fatal(err)
	}
	if book.Currency != "USD" || book.Prices["A100-SXM4-40GB"] != 1.60 || book.Prices["H100-SXM5-80GB"] != 2.40 ||
		book.Tiers["pro"] != 1.0 || book.Tiers["budget"] != 0.7 {
		t.Errorf("Load: got %+v", book)
	}
	if got := book.ColdStartSLA("budget"); got != 120*time.Second {
		t.Errorf("ColdStartSLA(budget) = %s, want 2m", got)
	}
	if got := book.ColdStartSLA("free"); got != 30*time.Second {
		t.Errorf("ColdStartSLA(free) = %s, want the default 30s", got)
	}
}

func TestTimezone(t *testing.T) {
	const good = "version: 1\ncurrency: USD\nprices: {A100-SXM4-40GB: 1.60}\ntiers: {pro: 1.0}\n"
	for _, tt := range []struct{ yaml, want string }{
		{good, "UTC"},
		{good + "timezone: UTC\n", "UTC"},
		{good + "timezone: Europe/Berlin\n", "Europe/Berlin"},
		{good + "timezone: America/New_York\n", "America/New_York"},
	} {
		book, err := Parse("p.yaml", []byte(tt.yaml))
		if err != nil {
			t.Fatal(err)
		}
		if got := book.Zone().String(); got != tt.want {
			t.Errorf("Parse(%q).Zone() = %s, want %s", tt.yaml, got, tt.want)
		}
	}
	if got := (&PriceBook{}).Zone(); got != time.UTC {
		t.Errorf("a price book without a zone: %s, want UTC", got)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join("testdata", "nope.yaml"))
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Errorf("Load of a missing file: got %v, want an error naming it", err)
	}
}

func TestParseErrors(t *testing.T) {
	const good = "version: 1\ncurrency: USD\nprices: {A100-SXM4-40GB: 1.60}\ntiers: {pro: 1.0}\n"
	tests := []struct {
		name string
		yaml string
		want []string // each must appear in the error
	}{
		{"empty file", "", []string{"p.yaml", "the file is empty"}},
		{"not yaml", "prices: [1, 2", []string{"p.yaml", "not YAML"}},
		{"not a mapping", "- 1\n", []string{"p.yaml:1", "a list; expected a mapping"}},
		{"unknown key", good + "colour: red\n", []string{"p.yaml:5", "colour: unknown field", "expected one of version, currency, prices, tiers, sla, contracts, timezone, changes"}},
		{"unknown zone", good + "timezone: Mars/Olympus\n", []string{"p.yaml:5", `timezone: "Mars/Olympus"`, "IANA time zone"}},
		{"local zone", good + "timezone: Local\n", []string{`timezone: "Local"`}},
		{"empty zone", good + "timezone: \"\"\n", []string{`timezone: ""`}},
		{"zone a number", good + "timezone: 1\n", []string{`timezone: "1"`}},
		{"missing version", "currency: USD\nprices: {A: 1}\ntiers: {pro: 1}\n", []string{"version: missing"}},
		{"missing everything", "version: 1\n", []string{"currency: missing", "prices: missing", "tiers: missing"}},
		{"wrong version", strings.Replace(good, "version: 1", "version: 2", 1), []string{"p.yaml:1", `version: "2"; expected 1`}},
		{"version as text", strings.Replace(good, "version: 1", `version: "1"`, 1), []string{`version: "1"; expected 1`}},
		{"bad currency", strings.Replace(good, "USD", "dollars", 1), []string{"p.yaml:2", `currency: "dollars"`, "ISO 4217"}},
		{"negative price", strings.Replace(good, "1.60", "-1.6", 1), []string{"p.yaml:3", `prices.A100-SXM4-40GB: "-1.6"`, "> 0"}},
		{"zero price", strings.Replace(good, "1.60", "0", 1), []string{`prices.A100-SXM4-40GB: "0"`}},
		{"price as text", strings.Replace(good, "1.60", "cheap", 1), []string{`prices.A100-SXM4-40GB: "cheap"`}},
		{"price infinite", strings.Replace(good, "1.60", ".inf", 1), []string{`prices.A100-SXM4-40GB: ".inf"`}},
		{"price missing value", strings.Replace(good, "1.60", "", 1), []string{`prices.A100-SXM4-40GB: an empty value`}},
		{"no prices", strings.Replace(good, "{A100-SXM4-40GB: 1.60}", "{}", 1), []string{"prices: empty"}},
		{"prices a list", strings.Replace(good, "{A100-SXM4-40GB: 1.60}", "[1.6]", 1), []string{"prices: a list", "mapping of GPU model to number"}},
		{"zero multiplier", strings.Replace(good, "pro: 1.0", "pro: 0", 1), []string{"p.yaml:4", `tiers.pro: "0"`, "multiplier > 0"}},
		{"duplicate tier", strings.Replace(good, "pro: 1.0", "pro: 1.0, pro: 2", 1), []string{"tiers.pro: given twice"}},
		{"sla unknown key", good + "sla: {warm_start: {pro: 1s}}\n", []string{"p.yaml:5", "sla.warm_start: unknown field"}},
		{"sla bad duration", good + "sla: {cold_start: {pro: 30}}\n", []string{`sla.cold_start.pro: "30"`, "duration > 0"}},
		{"sla negative", good + "sla: {cold_start: {pro: -3s}}\n", []string{`sla.cold_start.pro: "-3s"`}},
		{"sla unknown tier", good + "sla: {cold_start: {gold: 30s}}\n", []string{`sla.cold_start.gold: tier "gold" is not in tiers`, "(pro)"}},
		{"two problems", strings.Replace(strings.Replace(good, "USD", "usd", 1), "1.60", "-1", 1), []string{"currency", "prices.A100-SXM4-40GB"}},
		{"two documents", good + "---\nversion: 1\n", []string{"a second YAML document"}},
		{"costs unknown key", good + "costs: {rent: 1}\n", []string{"p.yaml:5", "costs.rent: unknown field", "gpu_hour or energy_kwh"}},
		{"costs not a mapping", good + "costs: 3\n", []string{"p.yaml:5", `costs: "3"`, "gpu_hour"}},
		{"cost negative", good + "costs: {gpu_hour: {A100-SXM4-40GB: -1}}\n", []string{"p.yaml:5", `costs.gpu_hour.A100-SXM4-40GB: "-1"`, "cost ≥ 0"}},
		{"cost unpriced model", good + "costs: {gpu_hour: {L40S: 0.5}}\n", []string{"costs.gpu_hour.L40S: model not in prices", "(A100-SXM4-40GB)"}},
		{"energy as text", good + "costs: {energy_kwh: cheap}\n", []string{`costs.energy_kwh: "cheap"`, "per kWh"}},
		{"energy infinite", good + "costs: {energy_kwh: .inf, gpu_hour: {A100-SXM4-40GB: 1}}\n", []string{`costs.energy_kwh: ".inf"`}},
		// A model of prices without a cost would cost the operator nothing: refused, naming it.
		{"cost of a priced model missing", strings.Replace(good, "1.60}", "1.60, H100-SXM5-80GB: 2.40}", 1) + "costs: {gpu_hour: {A100-SXM4-40GB: 0.5}, energy_kwh: 0.2}\n",
			[]string{"p.yaml:5", "costs.gpu_hour.H100-SXM5-80GB: missing (the model is in prices)", "every model of prices (A100-SXM4-40GB, H100-SXM5-80GB)"}},
		{"energy cost only", good + "costs: {energy_kwh: 0.2}\n", []string{"p.yaml:5", "costs.gpu_hour.A100-SXM4-40GB: missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			book, err := Parse("p.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want an error", tt.yaml, book)
			}
			var fe *Error
			if !errors.As(err, &fe) {
				t.Errorf("error %v is not a *pricebook.Error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestParseCosts(t *testing.T) {
	const good = "version: 1\ncurrency: USD\nprices: {A100-SXM4-40GB: 1.60, L40S: 1}\ntiers: {pro: 1.0}\n"
	tests := []struct {
		name string
		yaml string
		want *Costs
	}{
		{"none", good, nil},
		{"both", good + "costs: {gpu_hour: {A100-SXM4-40GB: 0.9, L40S: 0}, energy_kwh: 0.12}\n", &Costs{GPUHour: map[string]float64{"A100-SXM4-40GB": 0.9, "L40S": 0}, EnergyKWh: 0.12}},
		{"paid off", good + "costs: {gpu_hour: {A100-SXM4-40GB: 0, L40S: 0}, energy_kwh: 1}\n", &Costs{GPUHour: map[string]float64{"A100-SXM4-40GB": 0, "L40S": 0}, EnergyKWh: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			book, err := Parse("p.yaml", []byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(book.Costs, tt.want) {
				t.Errorf("costs %+v, want %+v", book.Costs, tt.want)
			}
		})
	}
}

func TestParseAcceptsIntegersAndAliases(t *testing.T) {
	book, err := Parse("p.yaml", []byte("version: 1\ncurrency: EUR\nprices: {L40S: 1}\ntiers: {pro: &one 1, free: *one}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if book.Prices["L40S"] != 1 || book.Tiers["free"] != 1 || book.Currency != "EUR" {
		t.Errorf("got %+v", book)
	}
}

func TestLookupErrors(t *testing.T) {
	book := &PriceBook{Prices: map[string]float64{"B": 1, "A": 2}, Tiers: map[string]float64{"pro": 1}}
	_, err := book.Price("H200-SXM-141GB")
	if !errors.Is(err, ErrNoPrice) || !strings.Contains(err.Error(), `"H200-SXM-141GB"`) || !strings.Contains(err.Error(), "A, B") {
		t.Errorf("Price of an unpriced model: %v", err)
	}
	_, err = book.Multiplier("gold")
	if !errors.Is(err, ErrUnknownTier) || !strings.Contains(err.Error(), `"gold"`) || !strings.Contains(err.Error(), "pro") {
		t.Errorf("Multiplier of an unknown tier: %v", err)
	}
}

func TestListCost(t *testing.T) {
	// The README's example, mig-basic acme: 1g.5gb of an A100 at 1.60, billed 3588 s.
	if got := ListCost(1.60, 1.0/7, 3588*time.Second); math.Abs(got-0.227809524) > 1e-9 {
		t.Errorf("ListCost = %v; want 0.227810", got)
	}
}

func TestBilledFraction(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		name    string
		in      Instance
		want    float64
		wantErr string
	}{
		{"whole GPU", Instance{Kind: "gpu"}, 1, ""},
		{"MIG 3g.20gb", Instance{Kind: "mig", ComputeSlices: 3}, 3.0 / 7, ""},
		{"MIG 7g.40gb", Instance{Kind: "mig", ComputeSlices: 7}, 1, ""},
		{"MIG no slices", Instance{Kind: "mig"}, 0, "compute slices 0"},
		{"MIG 8 slices", Instance{Kind: "mig", ComputeSlices: 8}, 0, "compute slices 8"},
		{"vGPU H100-20C", Instance{Kind: "vgpu", MemTotalBytes: 20 * gib, GPUMemTotalBytes: 80 * gib}, 0.25, ""},
		{"vGPU no GPU framebuffer", Instance{Kind: "vgpu", MemTotalBytes: 20 * gib}, 0, "vGPU framebuffer"},
		{"vGPU larger than GPU", Instance{Kind: "vgpu", MemTotalBytes: 90 * gib, GPUMemTotalBytes: 80 * gib}, 0, "vGPU framebuffer"},
		{"share of 4", Instance{Kind: "share", ShareReplicas: 4, MemTotalBytes: 20 * gib, GPUMemTotalBytes: 80 * gib}, 0.25, ""},
		{"share of 3 (memory does not divide)", Instance{Kind: "share", ShareReplicas: 3, MemTotalBytes: 80 * gib / 3, GPUMemTotalBytes: 80 * gib}, 1.0 / 3, ""},
		{"share of 1", Instance{Kind: "share", ShareReplicas: 1}, 1, ""},
		{"share without replicas", Instance{Kind: "share"}, 0, "share of 0 replicas"},
		{"unknown kind", Instance{Kind: "tpu"}, 0, `kind "tpu"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := BilledFraction(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("BilledFraction = %v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("BilledFraction = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestMIGOverhead(t *testing.T) {
	tests := []struct {
		name          string
		sms, gpuSMs   uint32
		slices        uint32
		want, epsilon float64
	}{
		// attribution/README.md, "Definitions": an A100-SXM4-40GB 1g.5gb loses 1 − (14/108)/(1/7) = 9.26 %.
		{"A100 1g.5gb", 14, 108, 1, 0.0926, 5e-5},
		{"A100 3g.20gb", 42, 108, 3, 1 - (42.0/108)/(3.0/7), 1e-12},
		{"A100 7g.40gb", 98, 108, 7, 1 - 98.0/108, 1e-12},
		{"H100 7g.80gb has every SM", 132, 132, 7, 0, 1e-12},
		{"more SMs than billed is no overhead", 30, 108, 1, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bf, err := MIGFraction(tt.slices)
			if err != nil {
				t.Fatal(err)
			}
			got, err := MIGOverhead(tt.sms, tt.gpuSMs, bf)
			if err != nil || math.Abs(got-tt.want) > tt.epsilon {
				t.Errorf("MIGOverhead = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	if _, err := MIGOverhead(14, 0, 1.0/7); err == nil {
		t.Error("MIGOverhead with no GPU SMs: want an error")
	}
}
