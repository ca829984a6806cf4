package store

import (
	"sync"
	"time"

	"github.com/slicemeter/slicemeter/attribution/billing"
)

// ColdStarts remembers, between the attribution service's passes, the first attached sample
// found for each allocation, so that its cold-start search is not run again for every minute
// of an allocation that started long ago. The search reads samples_1m, sorted by node first,
// over the allocation's first minutes: for every target of a minute that is most of the
// granules of the day so far, and its cost grew with the allocations' age (docs/benchmarks.md).
//
// The answer for a window is the first attached sample in [requested_at, end of the billed
// time); once found before the window's end, a later window has the same answer unless a
// sample earlier than it arrives late. Only answers older than Pass's bound are remembered:
// the service sets it to the start of its lookback, before which a late sample changes no
// stored minute either. An entry is used only for the allocation's same target and
// requested_at, and only for windows that end after it (an earlier window has no answer).
// Safe for concurrent use; nil remembers nothing.
type ColdStarts struct {
	mu     sync.Mutex
	known  map[string]knownFirst
	before int64 // ns: only firsts before it are remembered
	pass   uint64
}

type knownFirst struct {
	target           billing.Target
	requested, first int64
	used             uint64 // the last pass that found or used it
}

// keepPasses is how many passes an entry no report asked for is kept: an allocation that
// ended is forgotten two passes later.
const keepPasses = 2

// NewColdStarts returns an empty memory.
func NewColdStarts() *ColdStarts { return &ColdStarts{known: map[string]knownFirst{}} }

// Pass starts a pass: from now on, first attached samples before before are remembered, and
// the entries no report used in the last keepPasses passes are dropped.
func (c *ColdStarts) Pass(before time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pass++
	c.before = before.UnixNano()
	for id, k := range c.known {
		if k.used+keepPasses < c.pass {
			delete(c.known, id)
		}
	}
}

// Forget drops every entry (allocations changed: their searches are run again).
func (c *ColdStarts) Forget() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.known)
}

// Len is the number of allocations remembered.
func (c *ColdStarts) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.known)
}

// lookup is b's first attached sample if it is remembered and answers b's search.
func (c *ColdStarts) lookup(b billing.Billed) (int64, bool) {
	if c == nil {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.known[b.ID]
	if !ok || k.target != b.Target || k.requested != b.Requested || k.first >= b.Billed.End {
		return 0, false
	}
	k.used = c.pass
	c.known[b.ID] = k
	return k.first, true
}

// remember keeps b's first attached sample if it is older than the pass's bound.
func (c *ColdStarts) remember(b billing.Billed, first int64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if first >= c.before {
		return
	}
	c.known[b.ID] = knownFirst{target: b.Target, requested: b.Requested, first: first, used: c.pass}
}
