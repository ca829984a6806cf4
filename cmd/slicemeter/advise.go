//go:build !exporter_only

package main

import (
	"context"
	"io"
	"log/slog"
	"net/url"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/attribution/advice"
	"github.com/slicemeter/slicemeter/attribution/request"
	"github.com/slicemeter/slicemeter/internal/usage"
)

// newAdviseCmd is `slicemeter advise`: its flags are the request's parameters
// (request.AdviceParams), parsed as GET /api/v1/advice's query is.
func newAdviseCmd(app *kingpin.Application, stdout io.Writer) command {
	c := app.Command("advise", "Right-sizing: for each allocation of a window, the smallest shape of its GPU that holds its measured need with headroom, and what the move saves.")
	var dsn, file, scenario string
	dsnFlagVar(c, &dsn)
	pricebookSourceFlags(c, &file, &scenario)
	p := map[string]*string{
		"from":             c.Flag("from", "Window start, RFC 3339 (default: 7 days before --to).").String(),
		"to":               c.Flag("to", "Window end (exclusive), RFC 3339 (default: now; advice stops at the horizon).").String(),
		"by":               c.Flag("by", "One row per allocation, per tenant, or per GPU model then __fleet__ (the fleet summary).").Default("allocation").Enum("allocation", "tenant", "model"),
		"format":           c.Flag("format", "Output format.").Default("csv").Enum("csv", "json"),
		"compute_headroom": c.Flag("advise.compute-headroom", "A shape must deliver the compute need × (1 + this).").Default("0.2").String(),
		"memory_headroom":  c.Flag("advise.memory-headroom", "A shape must hold the memory need × (1 + this).").Default("0.1").String(),
		"min_measured":     c.Flag("advise.min-measured", "Less measured time than this in the window: action unknown.").Default("1h").String(),
	}
	samples := samplesFlag(c, "rollup-1m")
	return runFunc(func(ctx context.Context, logger *slog.Logger) error {
		params := url.Values{}
		for name, v := range p {
			params.Set(name, *v)
		}
		req, err := request.ParseAdvice(params, time.Now())
		if err != nil {
			return usage.Wrap(request.AdviceFlagError(err))
		}
		book, conn, err := bookAndDatabase(ctx, file, scenario, dsn)
		if err != nil {
			return err
		}
		defer conn.Close()
		req.Options.Samples = sampleSource(*samples)
		res, err := advice.Compute(ctx, conn, book, req.Options)
		if err != nil {
			return err
		}
		for _, note := range res.Notes { // what was left out of the advice, and why
			logger.WarnContext(ctx, note)
		}
		return res.Write(stdout, req.By, req.Format)
	})
}
