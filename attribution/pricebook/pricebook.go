// Package pricebook holds what an hour of a GPU costs (README.md, "The price book"): a list price
// per GPU model for one whole GPU and one hour, a multiplier per tier and the cold-start SLA
// per tier, and the rules that turn an instance into a billed fraction of its GPU.
package pricebook

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/schemas/scenario"
)

// DefaultColdStartSLA applies to tiers that the price book's sla section does not name.
const DefaultColdStartSLA = scenario.DefaultColdStartSLA

// ErrNoPrice and ErrUnknownTier are wrapped by the lookup errors, for errors.Is.
var (
	ErrNoPrice     = errors.New("no price")
	ErrUnknownTier = errors.New("unknown tier")
)

// PriceBook is a validated price book. Build one with Load, Parse or FromScenario.
type PriceBook struct {
	Currency string
	// Prices is the list price of one whole GPU for one hour, per GPU model.
	Prices map[string]float64
	// Tiers is the multiplier applied to the list cost, per tier.
	Tiers map[string]float64
	// ColdStart is the cold-start limit per tier; tiers not named get DefaultColdStartSLA.
	ColdStart map[string]time.Duration
	// JitterP99 is the p99 scheduling jitter limit per tier; tiers not named have none.
	JitterP99 map[string]time.Duration
	// Contracts: tenant → GPU model → the tenant's price for one whole GPU and one hour, in
	// place of list price × tier multiplier (list cost stays at list price).
	Contracts map[string]map[string]float64
	// Changes are effective-dated changes of prices and contracts (see CostsBetween).
	Changes []Change
	// Costs is what the operator pays (field costs, optional): `slicemeter fleet`'s operator
	// cost and margin. Nil: not given (the fleet report leaves them empty).
	Costs *Costs
	// Location is the time zone whose calendar months are the billing periods and the
	// windows of `report --step month` (field timezone, an IANA name); nil: UTC.
	Location *time.Location
}

// Costs is a cost per whole GPU-hour of capacity, per GPU model (a model it does not name
// costs 0), and a price per kWh of the GPUs' energy.
type Costs struct {
	GPUHour   map[string]float64
	EnergyKWh float64
}

// Zone is the price book's time zone (Location), UTC when it names none.
func (pb *PriceBook) Zone() *time.Location {
	if pb == nil || pb.Location == nil {
		return time.UTC
	}
	return pb.Location
}

// FromScenario takes the price book a scenario carries (its currency, prices, tiers and sla keys).
// The scenario loader has validated them already.
func FromScenario(s *scenario.Scenario) *PriceBook {
	return &PriceBook{
		Currency:  s.Currency,
		Prices:    maps.Clone(s.Prices),
		Tiers:     maps.Clone(s.Tiers),
		ColdStart: maps.Clone(s.ColdStartSLA),
		JitterP99: maps.Clone(s.JitterP99SLA),
		Costs:     scenarioCosts(s.Costs),
	}
}

func scenarioCosts(c *scenario.Costs) *Costs {
	if c == nil {
		return nil
	}
	return &Costs{GPUHour: maps.Clone(c.GPUHour), EnergyKWh: c.EnergyKWh}
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
