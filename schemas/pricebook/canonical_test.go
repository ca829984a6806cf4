package pricebook

import (
	"bytes"
	"os"
	"reflect"
	"testing"
	"time"
)

// The canonical hashes of books recorded before the canonical form was derived from the type
// (computed with the hand-kept copy it replaced): the attribution service compares a book's
// hash with the one stored in price_books, and another hash for the same book would make it
// attribute everything again. A change here is a change of every recorded book.
func TestCanonicalHashesOfRecordedBooks(t *testing.T) {
	for file, want := range map[string]string{
		"../../attribution/pricebook/testdata/example.yaml": "6067df9df8732a87ccfda2fdf31b2bd42620c9213d1069da7a952626ec668900",
		publicBook: "279931541a2f33b28a2f2ab1365498753f0347c90bbe34ce1316e38ee2d577c8",
		"../../cmd/slicemeter/testdata/pricebook-berlin.yaml": "337a1062e7ad69419fca8d3121adf7539d09e2425cfa61a13fb15682c21dc9a7",
	} {
		book, err := Load(file)
		if err != nil {
			t.Fatal(err)
		}
		if _, got, err := book.Canonical(); err != nil || got != want {
			t.Errorf("%s: canonical hash %s (%v), recorded %s", file, got, err, want)
		}
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	mar1, apr1 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	base := func() *PriceBook {
		return &PriceBook{Currency: "USD", Prices: map[string]float64{"A100": 1.60, "H100": 2.40}, Tiers: map[string]float64{"pro": 1, "budget": 0.7}}
	}
	full := base()
	full.ColdStart = map[string]time.Duration{"budget": 2 * time.Minute}
	full.JitterP99 = map[string]time.Duration{"pro": 5 * time.Millisecond}
	full.Contracts = map[string]map[string]float64{"acme": {"A100": 1.2}}
	full.Changes = []Change{{Effective: apr1, Prices: map[string]float64{"A100": 1.8}, Contracts: map[string]map[string]float64{"acme": {"A100": 1.1}}},
		{Effective: mar1.In(berlin), Prices: map[string]float64{"H100": 2.2}}}
	full.Costs = &Costs{GPUHour: map[string]float64{"A100": 0.5}, EnergyKWh: 0.2}
	full.Location = berlin
	empty := &PriceBook{Currency: "USD", Prices: map[string]float64{}, Tiers: map[string]float64{}, ColdStart: map[string]time.Duration{},
		JitterP99: map[string]time.Duration{}, Contracts: map[string]map[string]float64{}, Location: time.UTC, Costs: &Costs{}}
	for _, tc := range []struct {
		name string
		book *PriceBook
		text string
		hash string
	}{
		{"base", base(), `{"currency":"USD","prices":{"A100":1.6,"H100":2.4},"tiers":{"budget":0.7,"pro":1}}`,
			"9f89dd611670e493cc482abbdf9724bb0d07a47af2225491eb02d149f0c8c45d"},
		{"every field", full, `{"currency":"USD","prices":{"A100":1.6,"H100":2.4},"tiers":{"budget":0.7,"pro":1},"cold_start":{"budget":120000000000},` +
			`"jitter_p99":{"pro":5000000},"contracts":{"acme":{"A100":1.2}},"changes":[{"effective":"2026-03-01T00:00:00Z","prices":{"H100":2.2}},` +
			`{"effective":"2026-04-01T00:00:00Z","prices":{"A100":1.8},"contracts":{"acme":{"A100":1.1}}}],"costs":{"GPUHour":{"A100":0.5},"EnergyKWh":0.2},` +
			`"timezone":"Europe/Berlin"}`, "558870158b26395b46d247a8df5874884fe30e9dd94dedef8913512ea19b5b20"},
		{"empty maps, UTC", empty, `{"currency":"USD","prices":{},"tiers":{},"costs":{"GPUHour":null,"EnergyKWh":0}}`,
			"239503466d28737c21a4d106cd1958c9b4c66bb9c7c6eb4316c54e830ccec46f"},
	} {
		text, hash, err := tc.book.Canonical()
		if err != nil || string(text) != tc.text || hash != tc.hash {
			t.Errorf("%s: canonical\n%s\n%s (%v)\nrecorded\n%s\n%s", tc.name, text, hash, err, tc.text, tc.hash)
		}
		back, err := FromCanonical(text)
		if err != nil {
			t.Fatal(err)
		}
		if again, _, err := back.Canonical(); err != nil || !bytes.Equal(again, text) {
			t.Errorf("%s: read back and written again:\n%s\nwas\n%s (%v)", tc.name, again, text, err)
		}
	}
}

// Every field of the book, and of its changes and costs, is in the canonical form: setting any
// one of them gives a text no other does. A field added to PriceBook, Change or Costs is
// checked without a change here, or fails until the test knows a value of its type; a field
// that the canonical form left out would let a changed book skip its re-attribution.
func TestEveryFieldChangesTheCanonicalHash(t *testing.T) {
	base := PriceBook{Currency: "USD", Prices: map[string]float64{"A100": 1.6}, Tiers: map[string]float64{"pro": 1}}
	seen := map[string]string{}
	record := func(name string, b *PriceBook) {
		text, hash, err := b.Canonical()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if other, dup := seen[hash]; dup {
			t.Errorf("setting %s gives the canonical text of %s: %s", name, other, text)
		}
		seen[hash] = name
	}
	record("nothing", &base)
	for _, m := range mutations(t, reflect.TypeOf(base), "PriceBook") {
		b := base
		m.apply(reflect.ValueOf(&b).Elem())
		record(m.name, &b)
	}
	if len(seen) < 15 {
		t.Errorf("only %d variants of the book checked", len(seen))
	}
}

// mutation sets one field under a value of some type (v addressable) to a value not its zero.
type mutation struct {
	name  string
	apply func(v reflect.Value)
}

// leafValues are, per type, a value that differs from any the base book holds.
var leafValues = map[reflect.Type]any{
	reflect.TypeOf(""):                              "XTS",
	reflect.TypeOf(0.0):                             0.25,
	reflect.TypeOf(time.Time{}):                     time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC),
	reflect.TypeOf(&time.Location{}):                time.FixedZone("UTC+1", 3600),
	reflect.TypeOf(map[string]float64{}):            map[string]float64{"L40S": 3},
	reflect.TypeOf(map[string]time.Duration{}):      map[string]time.Duration{"pro": 7 * time.Second},
	reflect.TypeOf(map[string]map[string]float64{}): map[string]map[string]float64{"acme": {"A100": 1}},
}

// mutations lists, for every field under typ, how to set it: a leaf to leafValues' value, a
// struct reached through a pointer or a slice to one element, then each of its fields.
func mutations(t *testing.T, typ reflect.Type, name string) []mutation {
	if v, ok := leafValues[typ]; ok {
		return []mutation{{name, func(f reflect.Value) { f.Set(reflect.ValueOf(v)) }}}
	}
	switch {
	case typ.Kind() == reflect.Struct:
		var out []mutation
		for i := range typ.NumField() {
			for _, m := range mutations(t, typ.Field(i).Type, name+"."+typ.Field(i).Name) {
				out = append(out, mutation{m.name, func(v reflect.Value) { m.apply(v.Field(i)) }})
			}
		}
		return out
	case typ.Kind() == reflect.Pointer && typ.Elem().Kind() == reflect.Struct:
		out := []mutation{{name + " (zero)", func(v reflect.Value) { v.Set(reflect.New(typ.Elem())) }}}
		for _, m := range mutations(t, typ.Elem(), name) {
			out = append(out, mutation{m.name, func(v reflect.Value) { v.Set(reflect.New(typ.Elem())); m.apply(v.Elem()) }})
		}
		return out
	case typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.Struct:
		out := []mutation{{name + "[0] (zero)", func(v reflect.Value) { v.Set(reflect.MakeSlice(typ, 1, 1)) }}}
		for _, m := range mutations(t, typ.Elem(), name+"[0]") {
			out = append(out, mutation{m.name, func(v reflect.Value) { v.Set(reflect.MakeSlice(typ, 1, 1)); m.apply(v.Index(0)) }})
		}
		return out
	}
	t.Fatalf("%s: a field of type %s; give leafValues a value of it", name, typ)
	return nil
}

// FuzzParse: whatever the parser accepts is within the bounds, and its canonical text reads
// back into the same book.
func FuzzParse(f *testing.F) {
	for _, file := range []string{publicBook, "../../attribution/pricebook/testdata/example.yaml"} {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(datedBook))
	f.Add([]byte("version: 1\ncurrency: USD\nprices: {A: 1e12}\ntiers: {pro: 1e6}\ncosts: {gpu_hour: {A: 0}, energy_kwh: 1e6}\ntimezone: Europe/Berlin\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		book, err := Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		inBounds := func(what string, m map[string]float64, most float64) {
			for k, v := range m {
				if !(v > 0 && v <= most) {
					t.Fatalf("accepted %s %s = %v", what, k, v)
				}
			}
		}
		inBounds("price", book.Prices, MaxPrice)
		inBounds("multiplier", book.Tiers, MaxMultiplier)
		for _, c := range book.Changes {
			inBounds("changed price", c.Prices, MaxPrice)
		}
		if c := book.Costs; c != nil && !(c.EnergyKWh >= 0 && c.EnergyKWh <= MaxEnergyKWh) {
			t.Fatalf("accepted energy price %v", c.EnergyKWh)
		}
		text, hash, err := book.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		back, err := FromCanonical(text)
		if err != nil {
			t.Fatalf("canonical text does not read back: %v\n%s", err, text)
		}
		if again, hash2, err := back.Canonical(); err != nil || hash2 != hash {
			t.Fatalf("read back and written again:\n%s\nwas\n%s (%v)", again, text, err)
		}
	})
}
