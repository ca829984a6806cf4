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

// NewWriter is a Writer of the format on w.
func NewWriter(w io.Writer, f Format) (Writer, error) {
	switch f {
	case CSV:
		c := &csvWriter{w: bufio.NewWriterSize(w, csvBuffer)}
		for _, name := range Columns() {
			c.line.text(name)
		}
		if err := c.end(); err != nil {
			return nil, fmt.Errorf("write the FOCUS header: %w", err)
		}
		return c, nil
	case Parquet:
		l := layoutOnce()
		return &parquetWriter{l: l, w: parquet.NewWriter(w, ParquetSchema(), parquet.Compression(&parquet.Zstd), parquet.MaxRowsPerRowGroup(parquetRowGroup)),
			buf: reflect.MakeSlice(reflect.SliceOf(l.typ), 0, parquetBatch)}, nil
	}
	return nil, fmt.Errorf("FOCUS format %q: expected csv or parquet", f)
}

// csvWriter writes each row as encoding/csv would, appending its cells to one line (csvLine)
// written at once, through a buffer of csvBuffer: a month's file is hundreds of megabytes.
type csvWriter struct {
	w    *bufio.Writer
	line csvLine
}

const csvBuffer = 256 << 10

func (c *csvWriter) Write(r Row) error {
	r.emit(&c.line)
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

// parquetWriter buffers a few rows per call to the Parquet writer, which writes a row group
// every parquetRowGroup rows: memory stays bounded whatever the month's length (by default
// parquet-go would hold the whole file as one row group until Close).
type parquetWriter struct {
	l   parquetLayout
	w   *parquet.Writer
	buf reflect.Value // a slice of the layout's rows
}

const (
	parquetBatch    = 1024
	parquetRowGroup = 64 * 1024
)

func (p *parquetWriter) Write(r Row) error {
	n := p.buf.Len()
	p.buf = p.buf.Slice(0, n+1)
	p.l.toParquet(&r, p.buf.Index(n))
	if n+1 >= parquetBatch {
		return p.flush()
	}
	return nil
}

func (p *parquetWriter) flush() error {
	for i := range p.buf.Len() {
		if err := p.w.Write(p.buf.Index(i).Addr().Interface()); err != nil {
			return fmt.Errorf("write FOCUS rows as Parquet: %w", err)
		}
	}
	p.buf = p.buf.Slice(0, 0)
	return nil
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

// Metadata is the FOCUS metadata published beside an exported file: who generated it and
// its schema (FOCUS 1.2, "Metadata").
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
}

// Column is one column's definition in the metadata.
type Column struct {
	ColumnName     string `json:"ColumnName"`
	DataType       string `json:"DataType"`
	StringEncoding string `json:"StringEncoding,omitempty"`
	// ProviderTagPrefixes are the prefixes of the provider's own tag keys, which FOCUS 1.2
	// requires of the Tags column (and of no other).
	ProviderTagPrefixes []string `json:"ProviderTagPrefixes,omitempty"`
	Nullable            bool     `json:"x_Nullable"`
}

// SchemaID names the schema of Columns: it changes when they do.
const SchemaID = "slicemeter-focus-1.2-v2"

// NewMetadata is the metadata of a file of Columns created at created.
func NewMetadata(generator string, created time.Time) Metadata {
	var m Metadata
	m.DataGenerator.DataGenerator = generator
	m.Schema.SchemaID, m.Schema.FocusVersion, m.Schema.CreationDate = SchemaID, Version, created.UTC().Format(DateTime)
	t := reflect.TypeFor[Row]()
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("parquet"), ",")
		c := Column{ColumnName: name, Nullable: opts == "optional"}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Float64:
			c.DataType = "Decimal"
		case ft.Kind() == reflect.Bool:
			c.DataType = "Boolean"
		case strings.HasSuffix(name, "Start") || strings.HasSuffix(name, "End"):
			c.DataType, c.StringEncoding = "DateTime", "UTF-8"
		case name == "SkuPriceDetails":
			c.DataType, c.StringEncoding = "JSON", "UTF-8"
		case name == "Tags":
			c.DataType, c.StringEncoding, c.ProviderTagPrefixes = "JSON", "UTF-8", []string{TagPrefix}
		default:
			c.DataType, c.StringEncoding = "String", "UTF-8"
		}
		m.Schema.ColumnDefinition = append(m.Schema.ColumnDefinition, c)
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
func Cells(r Row) []string { return r.cells() }
