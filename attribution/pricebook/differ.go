// Package pricebook is what attribution does with a price book (schemas/pricebook is the book
// itself: its type, parser and rules): Differ, which says from when a new book bills
// differently and so what the service attributes again, the price book's command (check,
// example) and where the commands read a book from (--pricebook or --scenario).
package pricebook

import (
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

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
func Differ(old, new *pricebook.PriceBook) (d Difference, ok bool) {
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
	po, pn := old.Periods(), new.Periods()
	// Both timelines are steps that change only at a period's start: comparing at every start
	// of either book finds the first instant they differ, in time order.
	var starts []time.Time
	for _, p := range slices.Concat(po, pn) {
		starts = append(starts, p.From)
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

// inForce is the period of ps in force at t (ps from Periods: in order, the first from zero).
func inForce(ps []pricebook.Period, t time.Time) pricebook.Period {
	i := sort.Search(len(ps), func(i int) bool { return ps[i].From.After(t) })
	return ps[max(i-1, 0)]
}

// differAt names the first list or contract price that two periods set differently.
func differAt(a, b pricebook.Period) (string, bool) {
	for _, model := range slices.Sorted(maps.Keys(union(a.Prices, b.Prices))) {
		if !samePrice(a.Prices, b.Prices, model) {
			return "prices." + model, true
		}
	}
	tenants := map[string]bool{}
	for t := range a.Contracts {
		tenants[t] = true
	}
	for t := range b.Contracts {
		tenants[t] = true
	}
	for _, tenant := range slices.Sorted(maps.Keys(tenants)) {
		ca, cb := a.Contracts[tenant], b.Contracts[tenant]
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
