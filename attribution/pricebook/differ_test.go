package pricebook

import (
	"bytes"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

func base() *pricebook.PriceBook {
	return &pricebook.PriceBook{
		Currency: "USD",
		Prices:   map[string]float64{"A100": 1.60, "H100": 2.40},
		Tiers:    map[string]float64{"pro": 1, "budget": 0.7},
	}
}

var (
	mar1  = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	mar15 = time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC)
	apr1  = time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
)

func TestDiffer(t *testing.T) {
	with := func(edit func(*pricebook.PriceBook)) *pricebook.PriceBook {
		b := base()
		edit(b)
		return b
	}
	change := func(at time.Time, model string, price float64) pricebook.Change {
		return pricebook.Change{Effective: at, Prices: map[string]float64{model: price}}
	}
	for _, tc := range []struct {
		name     string
		old, new *pricebook.PriceBook
		differ   bool
		from     time.Time
		what     string
	}{
		{name: "same", old: base(), new: base()},
		{name: "same changes in another order",
			old: with(func(b *pricebook.PriceBook) {
				b.Changes = []pricebook.Change{change(mar1, "A100", 1.7), change(apr1, "A100", 1.8)}
			}),
			new: with(func(b *pricebook.PriceBook) {
				b.Changes = []pricebook.Change{change(apr1, "A100", 1.8), change(mar1, "A100", 1.7)}
			})},
		{name: "a change that sets the price it had", old: base(), new: with(func(b *pricebook.PriceBook) { b.Changes = []pricebook.Change{change(mar1, "A100", 1.60)} })},
		{name: "costs, jitter and zone are not stored", old: base(), new: with(func(b *pricebook.PriceBook) {
			b.Costs = &pricebook.Costs{EnergyKWh: 0.2}
			b.JitterP99 = map[string]time.Duration{"pro": time.Millisecond}
			b.Location = time.FixedZone("X", 3600)
		})},
		{name: "base price", old: base(), new: with(func(b *pricebook.PriceBook) { b.Prices["H100"] = 2.5 }), differ: true, what: "prices.H100"},
		{name: "currency", old: base(), new: with(func(b *pricebook.PriceBook) { b.Currency = "EUR" }), differ: true, what: "currency"},
		{name: "tier multiplier", old: base(), new: with(func(b *pricebook.PriceBook) { b.Tiers["budget"] = 0.6 }), differ: true, what: "tiers"},
		{name: "tier added", old: base(), new: with(func(b *pricebook.PriceBook) { b.Tiers["spot"] = 0.3 }), differ: true, what: "tiers"},
		{name: "cold start limit", old: base(), new: with(func(b *pricebook.PriceBook) { b.ColdStart = map[string]time.Duration{"pro": time.Minute} }),
			differ: true, what: "sla.cold_start.pro"},
		{name: "cold start limit written as the default", old: base(),
			new: with(func(b *pricebook.PriceBook) {
				b.ColdStart = map[string]time.Duration{"pro": pricebook.DefaultColdStartSLA}
			})},
		{name: "model newly priced", old: base(), new: with(func(b *pricebook.PriceBook) { b.Prices["L4"] = 0.8 }), differ: true, what: "prices.L4"},
		{name: "model no longer priced", old: with(func(b *pricebook.PriceBook) { b.Prices["L4"] = 0.8 }), new: base(), differ: true, what: "prices.L4"},
		{name: "retroactive change", old: base(), new: with(func(b *pricebook.PriceBook) { b.Changes = []pricebook.Change{change(mar15, "A100", 2)} }),
			differ: true, from: mar15, what: "prices.A100"},
		{name: "change moved earlier",
			old: with(func(b *pricebook.PriceBook) { b.Changes = []pricebook.Change{change(apr1, "A100", 2)} }),
			new: with(func(b *pricebook.PriceBook) { b.Changes = []pricebook.Change{change(mar15, "A100", 2)} }), differ: true, from: mar15, what: "prices.A100"},
		{name: "change moved later",
			old: with(func(b *pricebook.PriceBook) { b.Changes = []pricebook.Change{change(mar15, "A100", 2)} }),
			new: with(func(b *pricebook.PriceBook) { b.Changes = []pricebook.Change{change(apr1, "A100", 2)} }), differ: true, from: mar15, what: "prices.A100"},
		{name: "later change of the second of two",
			old: with(func(b *pricebook.PriceBook) {
				b.Changes = []pricebook.Change{change(mar1, "A100", 1.7), change(apr1, "H100", 2.6)}
			}),
			new: with(func(b *pricebook.PriceBook) {
				b.Changes = []pricebook.Change{change(mar1, "A100", 1.7), change(apr1, "H100", 2.7)}
			}),
			differ: true, from: apr1, what: "prices.H100"},
		{name: "change removed",
			old: with(func(b *pricebook.PriceBook) { b.Changes = []pricebook.Change{change(mar1, "A100", 1.7)} }), new: base(), differ: true, from: mar1, what: "prices.A100"},
		{name: "contract added by a change", old: base(),
			new: with(func(b *pricebook.PriceBook) {
				b.Changes = []pricebook.Change{{Effective: apr1, Contracts: map[string]map[string]float64{"acme": {"H100": 2}}}}
			}), differ: true, from: apr1, what: "contracts.acme.H100"},
		{name: "contract price", old: with(func(b *pricebook.PriceBook) { b.Contracts = map[string]map[string]float64{"acme": {"A100": 1.2}} }),
			new:    with(func(b *pricebook.PriceBook) { b.Contracts = map[string]map[string]float64{"acme": {"A100": 1.1}} }),
			differ: true, what: "contracts.acme.A100"},
		{name: "empty contract of a tenant", old: base(), new: with(func(b *pricebook.PriceBook) { b.Contracts = map[string]map[string]float64{"acme": {}} })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := Differ(tc.old, tc.new)
			if ok != tc.differ || !d.From.Equal(tc.from) || d.What != tc.what {
				t.Errorf("Differ: %+v, %v; want from %s (%s), %v", d, ok, tc.from, tc.what, tc.differ)
			}
			// Symmetric: the first instant either book bills differently.
			if back, ok := Differ(tc.new, tc.old); ok != tc.differ || !back.From.Equal(tc.from) {
				t.Errorf("Differ reversed: %+v, %v; want from %s, %v", back, ok, tc.from, tc.differ)
			}
		})
	}
}

func TestCanonicalRoundTrip(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	b := base()
	b.ColdStart = map[string]time.Duration{"budget": 2 * time.Minute}
	b.Contracts = map[string]map[string]float64{"acme": {"A100": 1.2}}
	b.Changes = []pricebook.Change{{Effective: apr1, Prices: map[string]float64{"A100": 1.8}}, {Effective: mar1, Prices: map[string]float64{"H100": 2.2}}}
	b.Costs = &pricebook.Costs{GPUHour: map[string]float64{"A100": 0.5}, EnergyKWh: 0.2}
	b.Location = berlin
	text, hash, err := b.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	back, err := pricebook.FromCanonical(text)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := Differ(b, back); ok {
		t.Errorf("read back differs: %+v", d)
	}
	again, hash2, err := back.Canonical()
	if err != nil || hash2 != hash || !bytes.Equal(again, text) {
		t.Errorf("canonical text read back and written again:\n%s\nwas\n%s (%v)", again, text, err)
	}
	if back.Zone().String() != "Europe/Berlin" {
		t.Errorf("zone read back: %s", back.Zone())
	}
	// The same book written in another order has the same hash; another book another.
	b.Changes[0], b.Changes[1] = b.Changes[1], b.Changes[0]
	if _, h, _ := b.Canonical(); h != hash {
		t.Errorf("changes in another order: hash %s, want %s", h, hash)
	}
	b.Prices["A100"] = 1.61
	if _, h, _ := b.Canonical(); h == hash {
		t.Errorf("another price, the same hash %s", h)
	}
}
