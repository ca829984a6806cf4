// Package pricebook is the price book, the contract of what an hour of a GPU costs
// (attribution/pricebook/README.md): its type, the one parser of its YAML (a price book file,
// or the fields a scenario carries), its bounds, its canonical form, and the rules that read
// it: a list price per GPU model for one whole GPU and one hour, a multiplier per tier, the
// SLA per tier, contracts, effective-dated changes, and the billed fraction of an instance.
package pricebook

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// DefaultColdStartSLA applies to tiers that the price book's sla section does not name.
const DefaultColdStartSLA = 30 * time.Second

// ErrNoPrice and ErrUnknownTier are wrapped by the lookup errors, for errors.Is.
var (
	ErrNoPrice     = errors.New("no price")
	ErrUnknownTier = errors.New("unknown tier")
)

// PriceBook is a validated price book. Build one with Load or Parse (a file), ParseFields (the
// fields a scenario carries) or FromCanonical (a recorded one).
//
// The json tags are the canonical form (Canonical) that the attribution service records and
// compares: a new field is in it by being here. The names and omitempty of the fields that
// exist are fixed: changing them changes the hash of every recorded book (canonical_test.go).
type PriceBook struct {
	Currency string `json:"currency"`
	// Prices is the list price of one whole GPU for one hour, per GPU model.
	Prices map[string]float64 `json:"prices"`
	// Tiers is the multiplier applied to the list cost, per tier.
	Tiers map[string]float64 `json:"tiers"`
	// ColdStart is the cold-start limit per tier; tiers not named get DefaultColdStartSLA.
	ColdStart map[string]time.Duration `json:"cold_start,omitempty"`
	// JitterP99 is the p99 scheduling jitter limit per tier; tiers not named have none.
	JitterP99 map[string]time.Duration `json:"jitter_p99,omitempty"`
	// Contracts: tenant → GPU model → the tenant's price for one whole GPU and one hour, in
	// place of list price × tier multiplier (list cost stays at list price).
	Contracts map[string]map[string]float64 `json:"contracts,omitempty"`
	// Changes are effective-dated changes of prices and contracts (see CostsBetween).
	Changes []Change `json:"changes,omitempty"`
	// Costs is what the operator pays (field costs, optional): `slicemeter fleet`'s operator
	// cost and margin. Nil: not given (the fleet report leaves them empty).
	Costs *Costs `json:"costs,omitempty"`
	// Location is the time zone whose calendar months are the billing periods and the
	// windows of `report --step month` (field timezone, an IANA name); nil: UTC. Canonical
	// writes it by name (a *time.Location has no JSON of its own).
	Location *time.Location `json:"timezone,omitempty"`
}

// Costs is a cost per whole GPU-hour of capacity, per GPU model (a model it does not name
// costs 0), and a price per kWh of the GPUs' energy. The JSON names are the Go names: that is
// how the canonical form has always written them.
type Costs struct {
	GPUHour   map[string]float64 `json:"GPUHour"`
	EnergyKWh float64            `json:"EnergyKWh"`
}

// Zone is the price book's time zone (Location), UTC when it names none.
func (pb *PriceBook) Zone() *time.Location {
	if pb == nil || pb.Location == nil {
		return time.UTC
	}
	return pb.Location
}

// Price is the list price of one whole GPU of the model for one hour.
func (pb *PriceBook) Price(model string) (float64, error) {
	p, ok := pb.Prices[model]
	if !ok {
		return 0, fmt.Errorf("%w for GPU model %q in the price book (it prices %s)", ErrNoPrice, model, list(pb.Prices))
	}
	return p, nil
}

// Multiplier is the tier's multiplier of the list cost.
func (pb *PriceBook) Multiplier(tier string) (float64, error) {
	m, ok := pb.Tiers[tier]
	if !ok {
		return 0, fmt.Errorf("%w %q: the price book's tiers are %s", ErrUnknownTier, tier, list(pb.Tiers))
	}
	return m, nil
}

// ColdStartSLA is the tier's cold-start limit: a cold start longer than this is a breach.
func (pb *PriceBook) ColdStartSLA(tier string) time.Duration {
	if d, ok := pb.ColdStart[tier]; ok {
		return d
	}
	return DefaultColdStartSLA
}

// ListCost is list price (one whole GPU, one hour) × billed fraction × billed time in hours.
func ListCost(price, billedFraction float64, billed time.Duration) float64 {
	return price * billedFraction * billed.Seconds() / 3600
}

// list names a map's keys, sorted, for error messages.
func list[V any](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	keys := slices.Sorted(maps.Keys(m))
	return strings.Join(keys, ", ")
}

// ContractPrices is how many per-tenant contract prices the book has (all tenants, models).
func (b *PriceBook) ContractPrices() int {
	n := 0
	for _, prices := range b.Contracts {
		n += len(prices)
	}
	return n
}
