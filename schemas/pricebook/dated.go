package pricebook

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"
)

// Change is an effective-dated price change: from Effective on, the models it names cost
// Prices (list price, one whole GPU, one hour) and the tenants it names pay Contracts. What it
// does not name keeps its earlier price.
type Change struct {
	Effective time.Time          `json:"effective"`
	Prices    map[string]float64 `json:"prices,omitempty"`
	// Contracts: tenant → GPU model → contract price for one whole GPU and one hour.
	Contracts map[string]map[string]float64 `json:"contracts,omitempty"`
}

// Period is the price book in force over [From, the next period's From); the first period
// starts at the beginning of time.
type Period struct {
	From      time.Time // zero for the first
	Prices    map[string]float64
	Contracts map[string]map[string]float64
}

// Periods applies the changes, in effective order, to the base prices and contracts.
func (pb *PriceBook) Periods() []Period {
	cur := Period{Prices: maps.Clone(pb.Prices), Contracts: cloneContracts(pb.Contracts)}
	out := []Period{cur}
	changes := slices.Clone(pb.Changes)
	sort.SliceStable(changes, func(i, j int) bool { return changes[i].Effective.Before(changes[j].Effective) })
	for _, c := range changes {
		next := Period{From: c.Effective, Prices: maps.Clone(cur.Prices), Contracts: cloneContracts(cur.Contracts)}
		maps.Copy(next.Prices, c.Prices)
		for tenant, prices := range c.Contracts {
			if next.Contracts[tenant] == nil {
				next.Contracts[tenant] = map[string]float64{}
			}
			maps.Copy(next.Contracts[tenant], prices)
		}
		out = append(out, next)
		cur = next
	}
	return out
}

func cloneContracts(c map[string]map[string]float64) map[string]map[string]float64 {
	out := make(map[string]map[string]float64, len(c))
	for tenant, prices := range c {
		out[tenant] = maps.Clone(prices)
	}
	return out
}

// segment is the part of [from, to) that one period covers.
type segment struct {
	Period
	d time.Duration
}

// split cuts [from, to) at the effective times of the changes, to the nanosecond.
func (pb *PriceBook) split(from, to time.Time) []segment {
	ps := pb.Periods()
	var out []segment
	for i, p := range ps {
		start := from
		if !p.From.IsZero() && p.From.After(start) {
			start = p.From
		}
		end := to
		if i+1 < len(ps) && ps[i+1].From.Before(end) {
			end = ps[i+1].From
		}
		if end.After(start) {
			out = append(out, segment{p, end.Sub(start)})
		}
	}
	return out
}

// ListCostBetween is the list cost of a billed fraction of one GPU of the model over
// [from, to), each part at the list price in force then.
func (pb *PriceBook) ListCostBetween(model string, fraction float64, from, to time.Time) (float64, error) {
	list, _, err := pb.CostsBetween("", "", model, fraction, from, to)
	return list, err
}

// CostsBetween is the list cost and the cost of a tenant holding a billed fraction of one GPU
// of the model over [from, to), split at the price changes. Where the tenant has a contract
// price for the model, the cost is at that price (the tier multiplier does not apply);
// elsewhere the cost is list cost × the tier's multiplier. An empty tier prices the list
// cost only (cost is then 0).
func (pb *PriceBook) CostsBetween(tenant, tier, model string, fraction float64, from, to time.Time) (list, cost float64, err error) {
	if _, err := pb.Price(model); err != nil {
		return 0, 0, err
	}
	multiplier := 0.0
	if tier != "" {
		if multiplier, err = pb.Multiplier(tier); err != nil {
			return 0, 0, err
		}
	}
	for _, s := range pb.split(from, to) {
		l := ListCost(s.Prices[model], fraction, s.d)
		list += l
		if contract, ok := s.Contracts[tenant][model]; ok && tenant != "" {
			cost += ListCost(contract, fraction, s.d)
		} else {
			cost += l * multiplier
		}
	}
	return list, cost, nil
}

// Dated says whether anything in the price book depends on the tenant or the time (contracts
// or changes): when not, list price × fraction × time × multiplier is the whole story.
func (pb *PriceBook) Dated() bool { return len(pb.Contracts) > 0 || len(pb.Changes) > 0 }

// CheckModels fails naming every model of the fleet that the price book cannot price.
func (pb *PriceBook) CheckModels(models []string) error {
	var missing []string
	for _, m := range models {
		if _, ok := pb.Prices[m]; !ok && !slices.Contains(missing, m) {
			missing = append(missing, m)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	return fmt.Errorf("%w for the fleet's GPU model(s) %q in the price book (it prices %s)", ErrNoPrice, missing, list(pb.Prices))
}
