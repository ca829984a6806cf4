package focus

import (
	"fmt"
	"io"
	"math/big"
	"os"
	"reflect"
	"strings"
	"sync"

	"github.com/parquet-go/parquet-go"
	"github.com/shopspring/decimal"
)

// The Parquet file holds the money columns (Row's fields tagged focus:"money") as Parquet's
// DECIMAL logical type, decimal(38, MoneyScale) in a 16-byte FIXED_LEN_BYTE_ARRAY, so that a
// reader gets the amount the CSV prints, not a float's neighbour of it. The other columns are
// as Row declares them. The file's row type is Row with those fields retyped (parquetType):
// parquet-go takes its schema, in Row's column order, from a struct.

// moneyPrecision is the precision of the money columns, as stored (Decimal(38, 12)).
const moneyPrecision = 38

// decimalBytes is the width of a decimal(38, s) cell.
const decimalBytes = 16

type decimalCell = [decimalBytes]byte

// parquetLayout is the Parquet row type of Row and which of its fields are money.
type parquetLayout struct {
	typ   reflect.Type
	money []bool // by field index
}

var layoutOnce = sync.OnceValue(func() parquetLayout {
	t := reflect.TypeFor[Row]()
	l := parquetLayout{money: make([]bool, t.NumField())}
	fields := make([]reflect.StructField, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		fields[i] = reflect.StructField{Name: f.Name, Type: f.Type, Tag: f.Tag}
		if f.Tag.Get("focus") != "money" {
			continue
		}
		l.money[i] = true
		name, opts, _ := strings.Cut(f.Tag.Get("parquet"), ",")
		tag := name
		if opts != "" {
			tag += "," + opts
		}
		tag += fmt.Sprintf(",decimal(%d:%d)", MoneyScale, moneyPrecision)
		fields[i].Tag = reflect.StructTag(fmt.Sprintf("parquet:%q", tag))
		fields[i].Type = reflect.TypeFor[decimalCell]()
		if f.Type.Kind() == reflect.Pointer {
			fields[i].Type = reflect.TypeFor[*decimalCell]()
		}
	}
	l.typ = reflect.StructOf(fields)
	return l
})

// ParquetSchema is the schema of the FOCUS Parquet file.
func ParquetSchema() *parquet.Schema {
	return parquet.SchemaOf(reflect.New(layoutOnce().typ).Elem().Interface())
}

// toParquet sets dst (a value of the layout's type) to r.
func (l parquetLayout) toParquet(r *Row, dst reflect.Value) {
	src := reflect.ValueOf(r).Elem()
	for i, isMoney := range l.money {
		f := src.Field(i)
		if !isMoney {
			dst.Field(i).Set(f)
			continue
		}
		if f.Kind() == reflect.Pointer {
			if f.IsNil() {
				dst.Field(i).SetZero()
				continue
			}
			cell, ok := decimalOf(f.Elem().Float())
			if !ok {
				dst.Field(i).SetZero()
				continue
			}
			dst.Field(i).Set(reflect.ValueOf(&cell))
			continue
		}
		cell, _ := decimalOf(f.Float()) // NaN and ±Inf: 0 (a required column has no null)
		dst.Field(i).Set(reflect.ValueOf(cell))
	}
}

// fromParquet is the Row of src (a value of the layout's type).
func (l parquetLayout) fromParquet(src reflect.Value) Row {
	var r Row
	dst := reflect.ValueOf(&r).Elem()
	for i, isMoney := range l.money {
		f := src.Field(i)
		if !isMoney {
			dst.Field(i).Set(f)
			continue
		}
		if f.Kind() == reflect.Pointer {
			if !f.IsNil() {
				v := floatOf(f.Elem().Interface().(decimalCell))
				dst.Field(i).Set(reflect.ValueOf(&v))
			}
			continue
		}
		dst.Field(i).SetFloat(floatOf(f.Interface().(decimalCell)))
	}
	return r
}

// decimalOf is v at MoneyScale as a decimal(38, MoneyScale) cell: the unscaled value, big
// endian, in two's complement.
func decimalOf(v float64) (decimalCell, bool) {
	var cell decimalCell
	d, ok := money(v)
	if !ok {
		return cell, false
	}
	u := d.Shift(MoneyScale).BigInt()
	if u.Sign() < 0 { // two's complement: 2^128 + u
		u.Add(u, new(big.Int).Lsh(big.NewInt(1), 8*decimalBytes))
	}
	u.FillBytes(cell[:])
	return cell, true
}

// floatOf is the amount of a decimal(38, MoneyScale) cell.
func floatOf(cell decimalCell) float64 {
	u := new(big.Int).SetBytes(cell[:])
	if cell[0]&0x80 != 0 {
		u.Sub(u, new(big.Int).Lsh(big.NewInt(1), 8*decimalBytes))
	}
	f, _ := decimal.NewFromBigInt(u, -MoneyScale).Float64()
	return f
}

// ReadParquet reads a FOCUS Parquet file back as rows, the money columns as the float64 of
// their decimals (which Cells prints as the CSV does).
func ReadParquet(r io.ReaderAt, size int64) ([]Row, error) {
	l := layoutOnce()
	f, err := parquet.OpenFile(r, size)
	if err != nil {
		return nil, fmt.Errorf("open the FOCUS Parquet file: %w", err)
	}
	pr := parquet.NewReader(f, ParquetSchema())
	defer pr.Close()
	var out []Row
	for {
		v := reflect.New(l.typ)
		if err := pr.Read(v.Interface()); err != nil {
			if err == io.EOF {
				return out, nil
			}
			return nil, fmt.Errorf("read the FOCUS Parquet file: %w", err)
		}
		out = append(out, l.fromParquet(v.Elem()))
	}
}

// ReadParquetFile is ReadParquet of a file.
func ReadParquetFile(name string) ([]Row, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("open the FOCUS Parquet file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("open the FOCUS Parquet file: %w", err)
	}
	return ReadParquet(f, st.Size())
}
