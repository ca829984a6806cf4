package pricebook

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"time"
)

// canonical is the price book as the attribution service records it (table price_books):
// JSON with sorted keys (encoding/json sorts map keys), changes in effective order, durations
// in ns and the zone by name, so that the same book, however its file is written, has the same
// text and hash.
type canonical struct {
	Currency  string                        `json:"currency"`
	Prices    map[string]float64            `json:"prices"`
	Tiers     map[string]float64            `json:"tiers"`
	ColdStart map[string]time.Duration      `json:"cold_start,omitempty"`
	JitterP99 map[string]time.Duration      `json:"jitter_p99,omitempty"`
	Contracts map[string]map[string]float64 `json:"contracts,omitempty"`
	Changes   []canonicalChange             `json:"changes,omitempty"`
	Costs     *Costs                        `json:"costs,omitempty"`
	Timezone  string                        `json:"timezone,omitempty"`
}

type canonicalChange struct {
	Effective time.Time                     `json:"effective"`
	Prices    map[string]float64            `json:"prices,omitempty"`
	Contracts map[string]map[string]float64 `json:"contracts,omitempty"`
}

// Canonical is the book's canonical text (see canonical) and its hash (SHA-256, hex).
func (pb *PriceBook) Canonical() (text []byte, hash string, err error) {
	c := canonical{Currency: pb.Currency, Prices: pb.Prices, Tiers: pb.Tiers, Contracts: pb.Contracts, Costs: pb.Costs}
	if len(pb.ColdStart) > 0 {
		c.ColdStart = pb.ColdStart
	}
	if len(pb.JitterP99) > 0 {
		c.JitterP99 = pb.JitterP99
	}
	if pb.Location != nil && pb.Location != time.UTC {
		c.Timezone = pb.Location.String()
	}
	changes := slices.Clone(pb.Changes)
	sort.SliceStable(changes, func(i, j int) bool { return changes[i].Effective.Before(changes[j].Effective) })
	for _, ch := range changes {
		c.Changes = append(c.Changes, canonicalChange{Effective: ch.Effective.UTC(), Prices: ch.Prices, Contracts: ch.Contracts})
	}
	text, err = json.Marshal(c)
	if err != nil {
		return nil, "", fmt.Errorf("render the price book canonically: %w", err)
	}
	sum := sha256.Sum256(text)
	return text, hex.EncodeToString(sum[:]), nil
}

// FromCanonical is the book of a canonical text (Canonical).
func FromCanonical(text []byte) (*PriceBook, error) {
	var c canonical
	if err := json.Unmarshal(text, &c); err != nil {
		return nil, fmt.Errorf("read a recorded price book: %w", err)
	}
	pb := &PriceBook{Currency: c.Currency, Prices: c.Prices, Tiers: c.Tiers, ColdStart: c.ColdStart, JitterP99: c.JitterP99,
		Contracts: c.Contracts, Costs: c.Costs}
	for _, ch := range c.Changes {
		pb.Changes = append(pb.Changes, Change{Effective: ch.Effective.UTC(), Prices: ch.Prices, Contracts: ch.Contracts})
	}
	if c.Timezone != "" {
		loc, err := time.LoadLocation(c.Timezone)
		if err != nil {
			return nil, fmt.Errorf("read a recorded price book: timezone %q: %w", c.Timezone, err)
		}
		pb.Location = loc
	}
	return pb, nil
}

// Difference is where two price books first price something differently.
type Difference struct {
	// From is the earliest instant from which they do; zero: from the beginning of time (what
	// is not dated differs: the currency, a tier's multiplier or cold-start limit).
	From time.Time
	// What names the first thing found to differ there, for logs (e.g. "prices.H100-SXM5-80GB").
	What string
}

// Differ is where the books old and new first bill anything differently, ok false when they
// bill everything alike. What is compared is what the stored minutes hold: the currency, the
// tiers' multipliers and cold-start limits (undated: a difference is from the beginning), and
// per GPU model the list price, and per tenant and model the contract price, each as its
// timeline through the changes (a model or contract one book has and the other lacks, at any
// time, differs). The operator's costs, the jitter limits and the time zone are read when a
// report is made, not stored, so they are not compared.
func Differ(old, new *PriceBook) (d Difference, ok bool) {
	switch {
	case old.Currency != new.Currency:
		return Difference{What: "currency"}, true
	case !maps.Equal(old.Tiers, new.Tiers):
		return Difference{What: "tiers"}, true
	}
	for _, tier := range slices.Sorted(maps.Keys(new.Tiers)) {
		if old.ColdStartSLA(tier) != new.ColdStartSLA(tier) {
			return Difference{What: "sla.cold_start." + tier}, true
		}
	}
	po, pn := old.periods(), new.periods()
	// Both timelines are steps that change only at a period's start: comparing at every start
	// of either book finds the first instant they differ, in time order.
	var starts []time.Time
	for _, p := range slices.Concat(po, pn) {
		starts = append(starts, p.from)
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	starts = slices.CompactFunc(starts, time.Time.Equal)
	for _, at := range starts {
		a, b := inForce(po, at), inForce(pn, at)
		if what, differ := differAt(a, b); differ {
			return Difference{From: at, What: what}, true
		}
	}
	return Difference{}, false
}

// inForce is the period of ps in force at t (ps from periods: in order, the first from zero).
func inForce(ps []period, t time.Time) period {
	i := sort.Search(len(ps), func(i int) bool { return ps[i].from.After(t) })
	return ps[max(i-1, 0)]
}

// differAt names the first list or contract price that two periods set differently.
func differAt(a, b period) (string, bool) {
	for _, model := range slices.Sorted(maps.Keys(union(a.prices, b.prices))) {
		if !samePrice(a.prices, b.prices, model) {
			return "prices." + model, true
		}
	}
	tenants := map[string]bool{}
	for t := range a.contracts {
		tenants[t] = true
	}
	for t := range b.contracts {
		tenants[t] = true
	}
	for _, tenant := range slices.Sorted(maps.Keys(tenants)) {
		ca, cb := a.contracts[tenant], b.contracts[tenant]
		for _, model := range slices.Sorted(maps.Keys(union(ca, cb))) {
			if !samePrice(ca, cb, model) {
				return "contracts." + tenant + "." + model, true
			}
		}
	}
	return "", false
}

func union(a, b map[string]float64) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// samePrice says whether both maps price key alike: both lack it, or both have the same price
// (bit for bit: any change of a price is a change of the bill).
func samePrice(a, b map[string]float64, key string) bool {
	x, okA := a[key]
	y, okB := b[key]
	return okA == okB && math.Float64bits(x) == math.Float64bits(y)
}
