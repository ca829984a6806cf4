package focus

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
)

// Format is how FOCUS rows are written.
type Format string

// The FOCUS file formats.
const (
	CSV     Format = "csv"
	Parquet Format = "parquet"
)

// Writer writes FOCUS rows one at a time; Close flushes what it holds and ends the file (it
// does not close the underlying io.Writer).
type Writer interface {
	Write(Row) error
	Close() error
}

// NewWriter is a Writer of the format on w, of the default FOCUS version.
func NewWriter(w io.Writer, f Format) (Writer, error) { return DefaultVersion.NewWriter(w, f) }

// NewWriter is a Writer of the format on w writing the version's columns.
func (v Version) NewWriter(w io.Writer, f Format) (Writer, error) {
	if _, err := ParseVersion(string(v)); err != nil {
		return nil, err
	}
	switch f {
	case CSV:
		c := &csvWriter{w: bufio.NewWriterSize(w, csvBuffer), v: v}
		for _, name := range v.Columns() {
			c.line.text(name)
		}
		if err := c.end(); err != nil {
			return nil, fmt.Errorf("write the FOCUS header: %w", err)
		}
		return c, nil
	case Parquet:
		return &parquetWriter{v: v, w: parquet.NewGenericWriter[any](w, layoutOf(v).schema, parquet.Compression(&parquet.Zstd), parquet.MaxRowsPerRowGroup(parquetRowGroup))}, nil
	}
	return nil, fmt.Errorf("FOCUS format %q: expected csv or parquet", f)
}

// csvWriter writes each row as encoding/csv would, appending its cells to one line (csvLine)
// written at once, through a buffer of csvBuffer: a month's file is hundreds of megabytes.
type csvWriter struct {
	w    *bufio.Writer
	line csvLine
	v    Version
}

const csvBuffer = 256 << 10

func (c *csvWriter) Write(r Row) error {
	r.emit(&c.line, c.v)
	if err := c.end(); err != nil {
		return fmt.Errorf("write a FOCUS row: %w", err)
	}
	return nil
}

func (c *csvWriter) end() error {
	c.line.b = append(c.line.b, '\n')
	_, err := c.w.Write(c.line.b)
	c.line = csvLine{b: c.line.b[:0]}
	return err
}

// Flush sends the rows written so far to the underlying io.Writer (a response that streams
// them).
func (c *csvWriter) Flush() error {
	if err := c.w.Flush(); err != nil {
		return fmt.Errorf("write the FOCUS rows: %w", err)
	}
	return nil
}

func (c *csvWriter) Close() error {
	if err := c.w.Flush(); err != nil {
		return fmt.Errorf("write the FOCUS rows: %w", err)
	}
	return nil
}

// parquetWriter writes each row as a Parquet row built from its cells (emit, as the CSV line
// is), without reflection; the writer starts a row group every parquetRowGroup rows, so memory
// stays bounded whatever the month's length (by default parquet-go would hold the whole file
// as one row group until Close).
type parquetWriter struct {
	w    *parquet.GenericWriter[any] // of the version's schema
	v    Version
	cell parquetCells
	rows []parquet.Row // a batch, written at parquetBatch rows; each row's slice is reused
	n    int           // rows in the batch
}

const (
	parquetBatch    = 1024
	parquetRowGroup = 64 * 1024
)

func (p *parquetWriter) Write(r Row) error {
	if p.n == len(p.rows) {
		p.rows = append(p.rows, nil)
	}
	p.cell.row = p.rows[p.n][:0]
	r.emit(&p.cell, p.v)
	p.rows[p.n] = p.cell.row
	if p.n++; p.n == parquetBatch {
		return p.flush()
	}
	return nil
}

// flush writes the batch; the writer copies the values, so the arena they point into is
// reused after.
func (p *parquetWriter) flush() error {
	if p.n == 0 {
		return nil
	}
	_, err := p.w.WriteRows(p.rows[:p.n])
	p.n, p.cell.arena = 0, p.cell.arena[:0]
	if err != nil {
		return fmt.Errorf("write FOCUS rows as Parquet: %w", err)
	}
	return nil
}

// parquetCells is a cellSink building a flat Parquet row of the schema (parquetLayout): one
// leaf column per cell, in Columns order; a required cell at definition level 0, an optional
// one at 1 (0 when null). Text is copied into arena, which the batch's values point into
// until the writer has copied them (WriteRows); when arena grows, the values made before keep
// pointing into its earlier array, which they keep alive. Text is kept raw (no spreadsheet guard: that is the
// CSV's); money is a DECIMAL(38, MoneyScale) cell (decimalOf).
type parquetCells struct {
	row   parquet.Row
	arena []byte
}

func (p *parquetCells) add(v parquet.Value, def int) {
	p.row = append(p.row, v.Level(0, def, len(p.row)))
}

func (p *parquetCells) bytes(b []byte) []byte {
	n := len(p.arena)
	p.arena = append(p.arena, b...)
	return p.arena[n:len(p.arena):len(p.arena)]
}

func (p *parquetCells) str(s string) []byte {
	n := len(p.arena)
	p.arena = append(p.arena, s...)
	return p.arena[n:len(p.arena):len(p.arena)]
}

func (p *parquetCells) text(s string) { p.add(parquet.ByteArrayValue(p.str(s)), 0) }

func (p *parquetCells) optText(s *string) {
	if s == nil {
		p.add(parquet.Value{}, 0)
		return
	}
	p.add(parquet.ByteArrayValue(p.str(*s)), 1)
}

func (p *parquetCells) num(v float64) { p.add(parquet.DoubleValue(v), 0) }

func (p *parquetCells) optNum(v *float64) {
	if v == nil {
		p.add(parquet.Value{}, 0)
		return
	}
	p.add(parquet.DoubleValue(*v), 1)
}

func (p *parquetCells) optBool(v *bool) {
	if v == nil {
		p.add(parquet.Value{}, 0)
		return
	}
	p.add(parquet.BooleanValue(*v), 1)
}

// money: NaN and ±Inf are 0 (a required column has no null; the report refuses them before).
func (p *parquetCells) money(v float64) {
	cell, _ := decimalOf(v)
	p.add(parquet.FixedLenByteArrayValue(p.bytes(cell[:])), 0)
}

func (p *parquetCells) optMoney(v *float64) {
	cell, ok := decimalOf(0)
	if v != nil {
		cell, ok = decimalOf(*v)
	}
	if v == nil || !ok {
		p.add(parquet.Value{}, 0)
		return
	}
	p.add(parquet.FixedLenByteArrayValue(p.bytes(cell[:])), 1)
}

func (p *parquetWriter) Close() error {
	if err := p.flush(); err != nil {
		return err
	}
	if err := p.w.Close(); err != nil {
		return fmt.Errorf("end the FOCUS Parquet file: %w", err)
	}
	return nil
}

// Metadata is the FOCUS metadata published beside an exported file: who generated it, its
// schema ("Metadata") and, from FOCUS 1.3, the dataset instance and its recency: when it
// was updated and which of its time sectors are complete.
type Metadata struct {
	DataGenerator struct {
		DataGenerator string `json:"DataGenerator"`
	} `json:"DataGenerator"`
	Schema struct {
		SchemaID         string   `json:"SchemaId"`
		FocusVersion     string   `json:"FocusVersion"`
		CreationDate     string   `json:"CreationDate"`
		ColumnDefinition []Column `json:"ColumnDefinition"`
	} `json:"Schema"`
	DatasetInstance []DatasetInstance `json:"DatasetInstance,omitempty"`
	Recency         []Recency         `json:"Recency,omitempty"`
}

// Column is one column's definition in the metadata.
type Column struct {
	ColumnName     string `json:"ColumnName"`
	DataType       string `json:"DataType"`
	StringEncoding string `json:"StringEncoding,omitempty"`
	// NumericPrecision and NumberScale are the money columns' (decimal(38, MoneyScale)).
	NumericPrecision int `json:"NumericPrecision,omitempty"`
	NumberScale      int `json:"NumberScale,omitempty"`
	// ProviderTagPrefixes are the prefixes of the provider's own tag keys, which FOCUS 1.2
	// requires of the Tags column (and of no other; 1.3's AllocatedTags too).
	ProviderTagPrefixes []string `json:"ProviderTagPrefixes,omitempty"`
	Nullable            bool     `json:"x_Nullable"`
}

// DatasetInstance names the dataset a file is an artifact of (FOCUS 1.3): slicemeter's one
// Cost and Usage dataset.
type DatasetInstance struct {
	DatasetInstanceID   string `json:"DatasetInstanceId"`
	DatasetInstanceName string `json:"DatasetInstanceName"`
	FocusDatasetID      string `json:"FocusDatasetId"`
}

// Recency is FOCUS 1.3's recency of a dataset instance: when it and its metadata were last
// updated, and its time sectors. The dataset is a time series (rows by charge period), so its
// completeness is per time sector.
type Recency struct {
	DatasetInstanceID          string       `json:"DatasetInstanceId"`
	RecencyLastUpdated         string       `json:"RecencyLastUpdated"`
	DatasetInstanceLastUpdated string       `json:"DatasetInstanceLastUpdated"`
	TimeSectors                []TimeSector `json:"TimeSectors"`
}

// TimeSector is one billing period (clipped to the file's range) of a file. Complete means
// that the period is closed: its figures are final, and what arrives later is billed as a
// Correction row of a later period. An open period's rows can still change.
type TimeSector struct {
	TimeSectorStart       string `json:"TimeSectorStart"`
	TimeSectorEnd         string `json:"TimeSectorEnd"`
	TimeSectorComplete    bool   `json:"TimeSectorComplete"`
	TimeSectorLastUpdated string `json:"TimeSectorLastUpdated"`
}

// DatasetInstanceID is slicemeter's Cost and Usage dataset instance.
const DatasetInstanceID = "slicemeter-cost-and-usage"

// SchemaID names the schema of a version's columns: it changes when they do.
func (v Version) SchemaID() string { return "slicemeter-focus-" + string(v) + "-v3" }

// NewMetadata is the metadata of a file of the default version's columns created at
// created, without recency.
func NewMetadata(generator string, created time.Time) Metadata {
	return DefaultVersion.Metadata(generator, created, nil)
}

// Sectors are the time sectors of [from, to): one per billing period of zone, clipped to the
// range, complete when closed says so of the period.
func Sectors(from, to time.Time, zone *time.Location, updated time.Time, closed func(Period) bool) []TimeSector {
	var out []TimeSector
	zone = zoneOr(zone)
	for start := from; start.Before(to); {
		p := PeriodOf(start, zone)
		end := p.End
		if to.Before(end) {
			end = to
		}
		out = append(out, TimeSector{TimeSectorStart: start.UTC().Format(DateTime), TimeSectorEnd: end.UTC().Format(DateTime),
			TimeSectorComplete:    closed != nil && start.Equal(p.Start) && end.Equal(p.End) && closed(p),
			TimeSectorLastUpdated: updated.UTC().Format(DateTime)})
		start = end
	}
	return out
}

// Metadata is the metadata of a file of the version's columns created at created. From
// FOCUS 1.3 it has the dataset instance and, when sectors are given, its recency.
func (v Version) Metadata(generator string, created time.Time, sectors []TimeSector) Metadata {
	var m Metadata
	m.DataGenerator.DataGenerator = generator
	m.Schema.SchemaID, m.Schema.FocusVersion, m.Schema.CreationDate = v.SchemaID(), string(v), created.UTC().Format(DateTime)
	t := reflect.TypeFor[Row]()
	for i := range t.NumField() {
		f := t.Field(i)
		if !v.has(f.Tag.Get("since")) {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("parquet"), ",")
		c := Column{ColumnName: name, Nullable: opts == "optional"}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Float64:
			c.DataType = "Decimal"
			if f.Tag.Get("focus") == "money" {
				c.NumericPrecision, c.NumberScale = moneyPrecision, MoneyScale
			}
		case ft.Kind() == reflect.Bool:
			c.DataType = "Boolean"
		case strings.HasSuffix(name, "Start") || strings.HasSuffix(name, "End"):
			c.DataType, c.StringEncoding = "DateTime", "UTF-8"
		case name == "SkuPriceDetails" || name == "AllocatedMethodDetails":
			c.DataType, c.StringEncoding = "JSON", "UTF-8"
		case name == "Tags" || name == "AllocatedTags":
			c.DataType, c.StringEncoding, c.ProviderTagPrefixes = "JSON", "UTF-8", []string{TagPrefix}
		default:
			c.DataType, c.StringEncoding = "String", "UTF-8"
		}
		m.Schema.ColumnDefinition = append(m.Schema.ColumnDefinition, c)
	}
	if !v.has(string(Focus13)) {
		return m
	}
	m.DatasetInstance = []DatasetInstance{{DatasetInstanceID: DatasetInstanceID, DatasetInstanceName: "GPU usage billed by " + generator, FocusDatasetID: "CostAndUsage"}}
	if len(sectors) > 0 {
		at := created.UTC().Format(DateTime)
		m.Recency = []Recency{{DatasetInstanceID: DatasetInstanceID, RecencyLastUpdated: at, DatasetInstanceLastUpdated: at, TimeSectors: sectors}}
	}
	return m
}

// Write writes the metadata as indented JSON.
func (m Metadata) Write(w io.Writer) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("render the FOCUS metadata: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write the FOCUS metadata: %w", err)
	}
	return nil
}

// Cells are the row's CSV cells in Columns order (an empty cell is null, a text one as
// report.SpreadsheetSafe makes it).
func Cells(r Row) []string { return r.cells(DefaultVersion) }

// Cells are the row's CSV cells in the version's Columns order.
func (v Version) Cells(r Row) []string { return r.cells(v) }
