package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/attribution/advice"
	"github.com/slicemeter/slicemeter/attribution/request"
	"github.com/slicemeter/slicemeter/internal/usage"
)

// adviseFlags are `slicemeter advise`'s flags: the request's parameters (request.AdviceParams)
// and where to read.
type adviseFlags struct {
	DSN, Pricebook, Scenario string
	Samples                  *string
	Params                   map[string]*string
}

// newAdviseCmd is `slicemeter advise`.
func newAdviseCmd(app *kingpin.Application, stdout io.Writer) command {
	c := app.Command("advise", "Right-sizing: for each allocation of a window, the smallest shape of its GPU that holds its measured need with headroom, and what the move saves.")
	f := &adviseFlags{Params: map[string]*string{}}
	dsnFlagVar(c, &f.DSN)
	pricebookSourceFlags(c, &f.Pricebook, &f.Scenario)
	f.Params["from"] = c.Flag("from", "Window start, RFC 3339 (default: 7 days before --to).").String()
	f.Params["to"] = c.Flag("to", "Window end (exclusive), RFC 3339 (default: now; advice stops at the horizon).").String()
	f.Params["by"] = c.Flag("by", "One row per allocation, per tenant, or per GPU model then __fleet__ (the fleet summary).").Default("allocation").Enum("allocation", "tenant", "model")
	f.Params["format"] = c.Flag("format", "Output format.").Default("csv").Enum("csv", "json")
	f.Params["compute_headroom"] = c.Flag("advise.compute-headroom", "A shape must deliver the compute need × (1 + this).").Default("0.2").String()
	f.Params["memory_headroom"] = c.Flag("advise.memory-headroom", "A shape must hold the memory need × (1 + this).").Default("0.1").String()
	f.Params["min_measured"] = c.Flag("advise.min-measured", "Less measured time than this in the window: action unknown.").Default("1h").String()
	f.Samples = samplesFlag(c, "rollup-1m")
	return runFunc(func(ctx context.Context, _ *slog.Logger) error { return f.run(ctx, stdout, time.Now()) })
}

// params are the flags as the request's parameters.
func (f *adviseFlags) params() url.Values {
	p := url.Values{}
	for name, v := range f.Params {
		p.Set(name, *v)
	}
	return p
}

func (f *adviseFlags) run(ctx context.Context, w io.Writer, now time.Time) error {
	req, err := request.ParseAdvice(f.params(), now)
	if err != nil {
		var e *request.Error
		if errors.As(err, &e) {
			return usage.Errorf("%s: %w", request.AdviceParams[e.Param], e.Err)
		}
		return usage.Wrap(err)
	}
	book, conn, err := bookAndDatabase(ctx, f.Pricebook, f.Scenario, f.DSN)
	if err != nil {
		return err
	}
	defer conn.Close()
	req.Options.Samples = sampleSource(*f.Samples)
	res, err := advice.Compute(ctx, conn, book, req.Options)
	if err != nil {
		return err
	}
	if err := res.Write(w, req.By, req.Format); err != nil {
		return fmt.Errorf("write the advice: %w", err)
	}
	return nil
}
