package local

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// FocusValidatorVersion is the FinOps Foundation's FOCUS validator that install-deps.sh puts in
// the cache: the last that runs on Python 3.11; it checks the FOCUS 1.0 rules.
const FocusValidatorVersion = "1.0.0"

// ErrNoFocusValidator is what FocusValidator wraps when install-deps.sh has not installed it.
var ErrNoFocusValidator = errors.New("the FOCUS validator is not installed (run deploy/local/install-deps.sh)")

// FocusValidator is the path of the focus-validator program install-deps.sh installs into its
// virtual environment in the cache.
func FocusValidator() (string, error) {
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "focus-validator-"+FocusValidatorVersion, "bin", "focus-validator")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrNoFocusValidator, p, err)
	}
	return p, nil
}

// focus10Names are the four columns focus-validator 1.0.0 knows by names older than FOCUS
// 1.0's own, keyed by the FOCUS 1.2 name a file has.
var focus10Names = map[string]string{
	"InvoiceIssuerName": "InvoiceIssuer", "ProviderName": "Provider", "PublisherName": "Publisher", "ResourceId": "ResourceID",
}

// focusOverride is the one rule of focus-validator 1.0.0's FOCUS 1.0 set that is skipped:
// SkuPriceId_Nullable queries ChargeType, the FOCUS 1.0-preview name of ChargeCategory, so it
// fails with KeyError("ChargeType") on a file of FOCUS 1.0 columns (checking nothing). What it
// means, SkuPriceId set on every Usage row, attribution/focus's tests check themselves.
const focusOverride = "overrides:\n  - SkuPriceId_Nullable\n"

// ValidateFOCUS runs the FOCUS validator (FOCUS 1.0 rules) on a FOCUS file, CSV or (by its
// .parquet name) Parquet, and fails naming each rule it breaks. The validator knows four
// columns by older names (focus10Names): it reads a copy of the file with only those columns
// renamed; one rule is skipped (focusOverride). It exits 0 whatever it finds, so its JUnit
// report is read instead.
func ValidateFOCUS(ctx context.Context, file string) error {
	bin, err := FocusValidator()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "focus-validator")
	if err != nil {
		return fmt.Errorf("a directory for the FOCUS validator: %w", err)
	}
	defer os.RemoveAll(dir)
	in, out, override := filepath.Join(dir, "focus.csv"), filepath.Join(dir, "result.xml"), filepath.Join(dir, "override.yaml")
	if strings.HasSuffix(file, ".parquet") {
		in = filepath.Join(dir, "focus.parquet")
		err = renameParquet(ctx, filepath.Join(filepath.Dir(bin), "python"), file, in)
	} else {
		err = renameCSV(file, in)
	}
	if err != nil {
		return err
	}
	if err := os.WriteFile(override, []byte(focusOverride), 0o600); err != nil {
		return fmt.Errorf("write the FOCUS validator's overrides: %w", err)
	}
	cmd := exec.CommandContext(ctx, bin, "--data-file", in, "--validate-version", "1.0", "--output-type", "unittest", "--output-destination", out,
		"--override-file", override)
	// It reads its list of currency codes by a path relative to its package's directory.
	sitePackages, err := filepath.Glob(filepath.Join(filepath.Dir(filepath.Dir(bin)), "lib", "python3*", "site-packages"))
	if err != nil || len(sitePackages) != 1 {
		return fmt.Errorf("the FOCUS validator's site-packages beside %s: %v %w", bin, sitePackages, err)
	}
	cmd.Dir = sitePackages[0]
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("focus-validator %s: %w\n%s", file, err, lastLines(string(msg), 20))
	}
	return readJUnit(out)
}

// renameCSV copies a FOCUS CSV file with its header's focus10Names renamed.
func renameCSV(file, to string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read the FOCUS file: %w", err)
	}
	header, rest, _ := bytes.Cut(data, []byte("\n"))
	cols := strings.Split(strings.TrimSuffix(string(header), "\r"), ",")
	for i, c := range cols {
		if old, ok := focus10Names[c]; ok {
			cols[i] = old
		}
	}
	if err := os.WriteFile(to, append([]byte(strings.Join(cols, ",")+"\n"), rest...), 0o600); err != nil {
		return fmt.Errorf("write the FOCUS file for the validator: %w", err)
	}
	return nil
}

// renameParquetScript rewrites a Parquet file (argv 1) as argv 2 with the columns renamed
// by the JSON object argv 3, with the pyarrow of the validator's virtual environment: the
// Go Parquet library cannot rename a column without rewriting the schema by hand. It also
// casts the DECIMAL columns (the money, decimal(38, 12)) to double: focus-validator 1.0's
// "IsDecimal" rules accept only a float dtype, and pandas reads a Parquet decimal as Python
// Decimal objects, so the validator would fail every money column of a file whose type is
// exactly what FOCUS asks for. The CSV, which it reads as floats, is checked as written.
const renameParquetScript = `import json, sys
import pyarrow as pa
import pyarrow.parquet as pq
t = pq.read_table(sys.argv[1])
t = t.cast(pa.schema([pa.field(f.name, pa.float64(), f.nullable) if pa.types.is_decimal(f.type) else f for f in t.schema]))
names = json.loads(sys.argv[3])
pq.write_table(t.rename_columns([names.get(c, c) for c in t.column_names]), sys.argv[2])
`

// renameParquet copies a FOCUS Parquet file with its focus10Names columns renamed.
func renameParquet(ctx context.Context, python, file, to string) error {
	names, err := json.Marshal(focus10Names)
	if err != nil {
		return fmt.Errorf("the FOCUS 1.0 column names: %w", err)
	}
	if msg, err := exec.CommandContext(ctx, python, "-c", renameParquetScript, file, to, string(names)).CombinedOutput(); err != nil {
		return fmt.Errorf("rename the FOCUS Parquet file %s's columns for the validator: %w\n%s", file, err, lastLines(string(msg), 20))
	}
	return nil
}

// junit is the part of the validator's JUnit report that says what failed.
type junit struct {
	Failures int `xml:"failures,attr"`
	Suites   []struct {
		Cases []struct {
			Name    string `xml:"name,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func readJUnit(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read the FOCUS validator's report: %w", err)
	}
	var r junit
	if err := xml.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("parse the FOCUS validator's report: %w", err)
	}
	var failed []string
	cases := 0
	for _, s := range r.Suites {
		for _, c := range s.Cases {
			cases++
			if c.Failure != nil {
				failed = append(failed, fmt.Sprintf("%s: %s %s", c.Name, c.Failure.Message, strings.TrimSpace(c.Failure.Text)))
			}
		}
	}
	if cases == 0 {
		return fmt.Errorf("the FOCUS validator's report lists no check:\n%s", lastLines(string(data), 20))
	}
	if r.Failures > 0 || len(failed) > 0 {
		return fmt.Errorf("the FOCUS validator finds %d failure(s):\n  %s", max(r.Failures, len(failed)), strings.Join(failed, "\n  "))
	}
	return nil
}
