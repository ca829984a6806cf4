//go:build !exporter_only

package main

import (
	"fmt"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/attribution/focus"
	"github.com/slicemeter/slicemeter/attribution/request"
)

// outputFlags are the output flags of `slicemeter report`: the format, the rows, and the FOCUS
// export's.
type outputFlags struct {
	format, by string
	focus      focus.Output
}

func addOutputFlags(c *kingpin.CmdClause) *outputFlags {
	f := &outputFlags{}
	c.Flag("format", "Output format; focus: FinOps FOCUS (--focus.version), one row per allocation per hour (whatever --step).").Default(request.CSV).EnumVar(&f.format, request.CommandFormats()...)
	c.Flag("by", "One row per tenant, or per allocation (the line items each tenant's row sums).").Default("tenant").EnumVar(&f.by, "tenant", "allocation")
	c.Flag("focus.file-format", "With --format focus: the file written to stdout, csv or parquet.").Default("csv").EnumVar((*string)(&f.focus.FileFormat), "csv", "parquet")
	c.Flag("focus.metadata", "With --format focus: write the FOCUS metadata (version, generator, schema) to this file.").StringVar(&f.focus.Metadata)
	issuerFlag(c, &f.focus.Issuer)
	versionFlag(c, (*string)(&f.focus.Version))
	return f
}

// versionFlag adds --focus.version; a bad value is a usage error naming the flag and what it
// takes (kingpin's enum error names neither).
func versionFlag(c *kingpin.CmdClause, dst *string) {
	c.Flag("focus.version", "The FOCUS version of the FOCUS files and metadata: 1.3 (the split-cost Allocated* columns, ServiceProviderName, HostProviderName, the metadata's recency) or 1.2.").
		Default(string(focus.DefaultVersion)).Action(func(*kingpin.ParseContext) error {
		if _, err := focus.ParseVersion(*dst); err != nil {
			return fmt.Errorf("--focus.version: %w", err)
		}
		return nil
	}).StringVar(dst)
}

func issuerFlag(c *kingpin.CmdClause, dst *string) {
	c.Flag("focus.issuer", "The FOCUS InvoiceIssuerName, ProviderName and PublisherName: who bills the GPUs.").Default(focus.DefaultIssuer.InvoiceIssuer).StringVar(dst)
}

// addExportFlags adds --billing.export-dir and --focus.issuer to a command that closes periods.
func addExportFlags(c *kingpin.CmdClause) *focus.MonthlyExport {
	f := &focus.MonthlyExport{}
	c.Flag("billing.export-dir", "When a billing period closes, write its FOCUS files here: focus-YYYY-MM.csv, .parquet and .metadata.json.").StringVar(&f.Dir)
	issuerFlag(c, &f.Issuer)
	versionFlag(c, (*string)(&f.Version))
	return f
}
