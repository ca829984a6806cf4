package focus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/slicemeter/slicemeter/attribution/report"
)

// IssuerNamed is the issuer of every FOCUS name column.
func IssuerNamed(name string) Issuer {
	return Issuer{InvoiceIssuer: name, Provider: name, Publisher: name}
}

// Output is where and how `slicemeter report --format focus` writes the FOCUS rows.
type Output struct {
	FileFormat Format
	Metadata   string // where the metadata is written; empty: nowhere
	Issuer     string
	Version    Version // empty: DefaultVersion
}

// Write writes the FOCUS rows of [from, to) to w as o says, and the metadata beside.
func (o Output) Write(ctx context.Context, e Export, from, to time.Time, w io.Writer) error {
	e.Issuer = IssuerNamed(o.Issuer)
	v, err := ParseVersion(string(o.Version))
	if err != nil {
		return err
	}
	fw, err := v.NewWriter(w, o.FileFormat)
	if err != nil {
		return err
	}
	if _, err := e.Usage(ctx, from, to, fw); err != nil {
		return err
	}
	if err := fw.Close(); err != nil {
		return err
	}
	if o.Metadata == "" {
		return nil
	}
	// A report's periods are not known to be closed: its sectors are incomplete (a closed
	// month's are in the period files).
	now := time.Now()
	return writeFile(o.Metadata, func(w io.Writer) error {
		return v.Metadata(Generator, now, Sectors(from, to, zoneOr(e.Zone), now, nil)).Write(w)
	})
}

// Generator is the FOCUS DataGenerator.
const Generator = "slicemeter"

// MonthlyExport says where the monthly FOCUS files go when a billing period closes, and who
// issues them.
type MonthlyExport struct {
	Dir     string
	Issuer  string
	Version Version // empty: DefaultVersion
}

// Month writes the FOCUS files of the billing period p into the directory: its Usage rows
// hour by hour, then a Correction row per correction line of its closed report (closed), as
// CSV and Parquet in one pass, and the metadata. Each file is written under a temporary name
// and renamed into place, so that a reader never sees a partial file.
func (f *MonthlyExport) Month(ctx context.Context, e Export, p Period, closed report.Report) (Totals, error) {
	e.Issuer = IssuerNamed(f.Issuer)
	base := filepath.Join(f.Dir, "focus-"+p.Name)
	var tot Totals
	v, err := ParseVersion(string(f.Version))
	if err != nil {
		return tot, fmt.Errorf("FOCUS export of %s: %w", p.Name, err)
	}
	if err := os.MkdirAll(f.Dir, 0o755); err != nil {
		return tot, fmt.Errorf("FOCUS export of %s: %w", p.Name, err)
	}
	err = writeFile(base+".csv", func(cw io.Writer) error {
		return writeFile(base+".parquet", func(pw io.Writer) error {
			c, err := v.NewWriter(cw, CSV)
			if err != nil {
				return err
			}
			pq, err := v.NewWriter(pw, Parquet)
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
	// The month is closed: its one time sector is complete.
	now := time.Now()
	isClosed := func(Period) bool { return true }
	if err := writeFile(base+".metadata.json", func(w io.Writer) error {
		return v.Metadata(Generator, now, Sectors(p.Start, p.End, zoneOr(e.Zone), now, isClosed)).Write(w)
	}); err != nil {
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
