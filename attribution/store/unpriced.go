package store

import (
	"maps"

	"github.com/slicemeter/slicemeter/attribution/pricebook"
)

// Priced is the presence without the GPUs of models the price book does not price: Extend
// prices every GPU it adds to the capacity, and an unpriced GPU is left out of the capacity
// (attributed as unpriced) rather than failing the window. p is not changed; it is returned
// as it is when every GPU is priced.
func (p *Presence) Priced(book *pricebook.PriceBook) *Presence {
	if p == nil {
		return nil
	}
	var out *Presence
	for g := range p.minutes {
		if _, ok := book.Prices[g.Model]; ok {
			continue
		}
		if out == nil {
			c := *p
			c.minutes = maps.Clone(p.minutes)
			out = &c
		}
		delete(out.minutes, g)
	}
	if out == nil {
		return p
	}
	return out
}
