package focus

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
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

// parquetLayout is the Parquet row type of a version's Row: its fields (Row's field index of
// each), and which of them are money.
type parquetLayout struct {
	typ    reflect.Type
	schema *parquet.Schema
	field  []int  // Row's field of each
	money  []bool // by field of typ
}

var layouts = sync.OnceValue(func() map[Version]parquetLayout {
	return map[Version]parquetLayout{Focus12: newLayout(Focus12), Focus13: newLayout(Focus13)}
})

// layoutOf is the version's layout.
func layoutOf(v Version) parquetLayout { return layouts()[v] }

func newLayout(v Version) parquetLayout {
	t := reflect.TypeFor[Row]()
	var l parquetLayout
	var fields []reflect.StructField
	for j := range t.NumField() {
		f := t.Field(j)
		if !v.has(f.Tag.Get("since")) {
			continue
		}
		i := len(fields)
		l.field = append(l.field, j)
		l.money = append(l.money, false)
		fields = append(fields, reflect.StructField{Name: f.Name, Type: f.Type, Tag: reflect.StructTag(fmt.Sprintf("parquet:%q", f.Tag.Get("parquet")))})
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
	l.schema = parquet.SchemaOf(reflect.New(l.typ).Elem().Interface())
	return l
}

// ParquetSchema is the schema of the FOCUS Parquet file of the default version.
func ParquetSchema() *parquet.Schema { return layoutOf(DefaultVersion).schema }

// ParquetSchema is the schema of the version's FOCUS Parquet file.
func (v Version) ParquetSchema() *parquet.Schema { return layoutOf(v).schema }

// fromParquet is the Row of src (a value of the layout's type).
func (l parquetLayout) fromParquet(src reflect.Value) Row {
	var r Row
	dst := reflect.ValueOf(&r).Elem()
	for i, isMoney := range l.money {
		f, d := src.Field(i), dst.Field(l.field[i])
		if !isMoney {
			d.Set(f)
			continue
		}
		if f.Kind() == reflect.Pointer {
			if !f.IsNil() {
				v := floatOf(f.Elem().Interface().(decimalCell))
				d.Set(reflect.ValueOf(&v))
			}
			continue
		}
		d.SetFloat(floatOf(f.Interface().(decimalCell)))
	}
	return r
}

// decimalOf is v at MoneyScale as a decimal(38, MoneyScale) cell: the unscaled value, big
// endian, in two's complement. Its digits are appendMoney's; an unscaled value that fits an
// int64 (amounts below about 9.2 million) is made without allocating.
func decimalOf(v float64) (decimalCell, bool) {
	var cell decimalCell
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return cell, false
	}
	var tmp [64]byte
	digits, neg := roundedDigits(tmp[:0], v)
	if u, ok := unscaled(digits); ok {
		if neg {
			u = -u
		}
		fill := byte(0)
		if u < 0 {
			fill = 0xff
		}
		for i := range decimalBytes - 8 {
			cell[i] = fill
		}
		binary.BigEndian.PutUint64(cell[decimalBytes-8:], uint64(u))
		return cell, true
	}
	d, _ := money(v)
	u := d.Shift(MoneyScale).BigInt()
	if u.Sign() < 0 { // two's complement: 2^128 + u
		u.Add(u, new(big.Int).Lsh(big.NewInt(1), 8*decimalBytes))
	}
	u.FillBytes(cell[:])
	return cell, true
}

// unscaled is digits (appendMoney's, unsigned) × 10^MoneyScale, if it fits an int64.
func unscaled(digits []byte) (int64, bool) {
	var u int64
	frac := -1
	for _, c := range digits {
		if c == '.' {
			frac = 0
			continue
		}
		if u > (math.MaxInt64-9)/10 {
			return 0, false
		}
		u = u*10 + int64(c-'0')
		if frac >= 0 {
			frac++
		}
	}
	for frac = max(frac, 0); frac < MoneyScale; frac++ {
		if u > math.MaxInt64/10 {
			return 0, false
		}
		u *= 10
	}
	return u, true
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
// their decimals (which Cells prints as the CSV does). The file's version is told by its
// columns (a 1.3 file has AllocatedMethodId).
func ReadParquet(r io.ReaderAt, size int64) ([]Row, error) {
	f, err := parquet.OpenFile(r, size)
	if err != nil {
		return nil, fmt.Errorf("open the FOCUS Parquet file: %w", err)
	}
	l := layoutOf(Focus12)
	if _, ok := f.Schema().Lookup("AllocatedMethodId"); ok {
		l = layoutOf(Focus13)
	}
	pr := parquet.NewReader(f, l.schema)
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
