package focus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/attribution/report"
)

// Flags are the output flags of `slicemeter report`: the format, the rows, and the FOCUS
// export's.
type Flags struct {
	Output     string // csv, json or focus
	By         string // tenant or allocation
	FileFormat string // FOCUS: csv or parquet
	Metadata   string // FOCUS: where the metadata is written; empty: nowhere
	Issuer     string
}

// FOCUS says whether the report asked for is the FOCUS export.
func (f *Flags) FOCUS() bool { return f.Output == "focus" }

// AddFlags adds the report command's output flags.
func AddFlags(c *kingpin.CmdClause) *Flags {
	f := &Flags{}
	c.Flag("format", "Output format; focus: FinOps FOCUS 1.2, one row per allocation per hour (whatever --step).").Default("csv").EnumVar(&f.Output, "csv", "json", "focus")
	c.Flag("by", "One row per tenant, or per allocation (the line items each tenant's row sums).").Default("tenant").EnumVar(&f.By, "tenant", "allocation")
	c.Flag("focus.file-format", "With --format focus: the file written to stdout, csv or parquet.").Default("csv").EnumVar(&f.FileFormat, "csv", "parquet")
	c.Flag("focus.metadata", "With --format focus: write the FOCUS metadata (version, generator, schema) to this file.").StringVar(&f.Metadata)
	issuerFlag(c, &f.Issuer)
	return f
}

func issuerFlag(c *kingpin.CmdClause, dst *string) {
	c.Flag("focus.issuer", "The FOCUS InvoiceIssuerName, ProviderName and PublisherName: who bills the GPUs.").Default(DefaultIssuer.InvoiceIssuer).StringVar(dst)
}

// IssuerNamed is the issuer of every FOCUS name column.
func IssuerNamed(name string) Issuer {
	return Issuer{InvoiceIssuer: name, Provider: name, Publisher: name}
}

// Run writes the FOCUS rows of [from, to) to w as the flags say, and the metadata beside.
func (f *Flags) Run(ctx context.Context, e Export, from, to time.Time, w io.Writer) error {
	e.Issuer = IssuerNamed(f.Issuer)
	fw, err := NewWriter(w, Format(f.FileFormat))
	if err != nil {
		return err
	}
	if _, err := e.Usage(ctx, from, to, fw); err != nil {
		return err
	}
	if err := fw.Close(); err != nil {
		return err
	}
	if f.Metadata == "" {
		return nil
	}
	return writeFile(f.Metadata, func(w io.Writer) error { return NewMetadata(Generator, time.Now()).Write(w) })
}

// Generator is the FOCUS DataGenerator.
const Generator = "slicemeter"

// ExportFlags say where the monthly FOCUS files go when a billing period closes.
type ExportFlags struct {
	Dir    string
	Issuer string
}

// AddExportFlags adds --billing.export-dir and --focus.issuer to a command that closes periods.
func AddExportFlags(c *kingpin.CmdClause) *ExportFlags {
	f := &ExportFlags{}
	c.Flag("billing.export-dir", "When a billing period closes, write its FOCUS files here: focus-YYYY-MM.csv, .parquet and .metadata.json.").StringVar(&f.Dir)
	issuerFlag(c, &f.Issuer)
	return f
}

// Month writes the FOCUS files of the billing period p into the directory: its Usage rows
// hour by hour, then a Correction row per correction line of its closed report (closed), as
// CSV and Parquet in one pass, and the metadata. Each file is written under a temporary name
// and renamed into place, so that a reader never sees a partial file.
func (f *ExportFlags) Month(ctx context.Context, e Export, p Period, closed report.Report) (Totals, error) {
	e.Issuer = IssuerNamed(f.Issuer)
	base := filepath.Join(f.Dir, "focus-"+p.Name)
	var tot Totals
	if err := os.MkdirAll(f.Dir, 0o755); err != nil {
		return tot, fmt.Errorf("FOCUS export of %s: %w", p.Name, err)
	}
	err := writeFile(base+".csv", func(cw io.Writer) error {
		return writeFile(base+".parquet", func(pw io.Writer) error {
			c, err := NewWriter(cw, CSV)
			if err != nil {
				return err
			}
			pq, err := NewWriter(pw, Parquet)
			if err != nil {
				return err
			}
			both := tee{c, pq}
			if tot, err = e.Usage(ctx, p.Start, p.End, both); err != nil {
				return err
			}
			if err := e.Corrections(closed, p, both, &tot); err != nil {
				return err
			}
			return both.Close()
		})
	})
	if err != nil {
		return tot, fmt.Errorf("FOCUS export of %s: %w", p.Name, err)
	}
	if err := writeFile(base+".metadata.json", func(w io.Writer) error { return NewMetadata(Generator, time.Now()).Write(w) }); err != nil {
		return tot, fmt.Errorf("FOCUS export of %s: %w", p.Name, err)
	}
	return tot, nil
}

// tee writes every row to each of its writers.
type tee []Writer

func (t tee) Write(r Row) error {
	for _, w := range t {
		if err := w.Write(r); err != nil {
			return err
		}
	}
	return nil
}

func (t tee) Close() error {
	var errs []error
	for _, w := range t {
		errs = append(errs, w.Close())
	}
	return errors.Join(errs...)
}

// writeFile writes path through write, under a temporary name renamed into place once
// complete; on failure nothing is left.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	defer os.Remove(f.Name()) // gone after the rename; removes what a failure left
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
