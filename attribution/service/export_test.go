package service

import (
	"context"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// SetReport replaces how the runner computes a minute (attribution.Report), for tests of what
// a pass does when one minute fails.
func (r *Runner) SetReport(f func(context.Context, store.Querier, *pricebook.PriceBook, attribution.Options) (attribution.Result, error)) {
	r.report = f
}

// ReachBack is reachBack, for its table test.
var ReachBack = reachBack
