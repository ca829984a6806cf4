package pricebook

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/slicemeter/slicemeter/schemas/validate"

	// The IANA zones inside the binary: a price book's timezone must not depend on the
	// host's zoneinfo.
	_ "time/tzdata"
)

// Error is one thing wrong in a price book, in its own file or in the fields a scenario
// carries: where, which field, what was written there and what was expected. Callers treat it
// as a usage error (exit status 2).
type Error struct {
	File     string
	Line     int    // 0 when there is no line to point at (a missing field)
	Field    string // dotted path, e.g. prices.A100-SXM4-40GB; empty for the whole file
	Got      string // the value as written (quoted), or what is wrong ("missing", "unknown field")
	Expected string
}

func (e *Error) Error() string {
	where := e.File
	if e.Line > 0 {
		where = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Field == "" {
		return fmt.Sprintf("price book %s: %s; expected %s", where, e.Got, e.Expected)
	}
	return fmt.Sprintf("price book %s: %s: %s; expected %s", where, e.Field, e.Got, e.Expected)
}

// Load reads and validates a price book file (format version 1):
//
//	version: 1
//	currency: USD
//	prices: {A100-SXM4-40GB: 1.60}
//	tiers: {pro: 1.0, budget: 0.7}
//	sla: {cold_start: {pro: 30s}, jitter_p99: {pro: 5ms}}   # jitter_p99 optional, no default
//	contracts: {acme: {A100-SXM4-40GB: 1.20}}          # optional: tenant's own price per model
//	timezone: Europe/Berlin                             # optional: billing months' zone (UTC)
//	costs: {gpu_hour: {A100-SXM4-40GB: 0.90}, energy_kwh: 0.12}   # optional: the operator's
//	changes:                                            # optional: effective-dated changes
//	  - effective: "2026-01-15T12:00:00Z"
//	    prices: {A100-SXM4-40GB: 1.80}
//	    contracts: {acme: {A100-SXM4-40GB: 1.30}}
func Load(path string) (*PriceBook, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read price book: %w", err)
	}
	return Parse(path, data)
}

// timezone is the IANA zone a timezone field names. "Local" and "" are refused: the billing
// month must not depend on the host.
func (p *parser) timezone(val *yaml.Node) *time.Location {
	const expected = "an IANA time zone name such as UTC or Europe/Berlin"
	if val.Kind != yaml.ScalarNode || val.Tag != "!!str" || val.Value == "" || val.Value == "Local" {
		p.fail(val, "timezone", quote(val), expected)
		return nil
	}
	loc, err := time.LoadLocation(val.Value)
	if err != nil {
		p.fail(val, "timezone", quote(val), expected)
		return nil
	}
	return loc
}

// Parse validates price book YAML; file names it in errors. It reports every problem it
// finds (joined), not only the first.
func Parse(file string, data []byte) (*PriceBook, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: file, Got: "the file is empty", Expected: expectedBook}
		}
		return nil, &Error{File: file, Got: "not YAML (" + strings.TrimPrefix(err.Error(), "yaml: ") + ")", Expected: expectedBook}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &Error{File: file, Line: extra.Line, Got: "a second YAML document", Expected: "one document"}
	}
	p := parser{file: file, fields: fileFields, expected: expectedBook}
	book := p.book(doc.Content[0])
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return book, nil
}

// ScenarioFields are the fields of a price book that a scenario carries beside its own
// (schemas/README.md, "Scenario files"); the scenario's version is the scenario's.
var ScenarioFields = []string{"currency", "prices", "tiers", "sla", "costs"}

// ParseFields reads the price book that the mapping doc carries among other fields (a
// scenario's): the fields of ScenarioFields, read and bounded as in a price book file; the
// other keys of doc are the caller's to check. The errors are *Error, as Parse's.
func ParseFields(file string, doc *yaml.Node) (*PriceBook, error) {
	p := parser{file: file, fields: ScenarioFields, expected: "a mapping with currency, prices, tiers and optionally sla, costs"}
	book := p.book(doc)
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return book, nil
}

const expectedBook = "a mapping with version: 1, currency, prices, tiers and optionally sla, contracts, timezone, changes, costs"

// fileFields are the fields of a price book file.
var fileFields = []string{"version", "currency", "prices", "tiers", "sla", "contracts", "timezone", "changes", "costs"}

// Bounds of the amounts, far above any real price, so that a typo (a price in cents, an
// exponent) is refused with the field named rather than billed: README.md, "Fields".
const (
	MaxPrice      = 1e12 // a list or contract price, or an operator's cost, of one GPU-hour
	MaxMultiplier = 1e6  // a tier's multiplier
	MaxEnergyKWh  = 1e6  // the operator's price of a kWh
)

var currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)

type parser struct {
	file     string
	fields   []string // the fields read (fileFields or ScenarioFields)
	expected string   // what the whole is expected to be, for its errors
	errs     []error
}

func (p *parser) fail(n *yaml.Node, field, got, expected string) {
	line := 0
	if n != nil {
		line = n.Line
	}
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Field: field, Got: got, Expected: expected})
}

func (p *parser) book(root *yaml.Node) *PriceBook {
	book := &PriceBook{ColdStart: map[string]time.Duration{}}
	var coldStart, jitter []namedNode // checked against the tiers once both are read
	var costsNode *yaml.Node          // checked against the prices once both are read
	seen := map[string]bool{}
	embedded := !slices.Contains(p.fields, "version")
	for key, val := range p.mapping(root, "", p.expected) {
		if embedded && !slices.Contains(p.fields, key.Value) {
			continue // the scenario's own field
		}
		seen[key.Value] = true
		switch key.Value {
		case "version":
			if v, err := strconv.Atoi(val.Value); val.Kind != yaml.ScalarNode || val.Tag != "!!int" || err != nil || v != 1 {
				p.fail(val, "version", quote(val), "1")
			}
		case "currency":
			if val.Kind != yaml.ScalarNode || !currencyCode.MatchString(val.Value) {
				p.fail(val, "currency", quote(val), "an ISO 4217 code such as USD (three capital letters)")
			}
			book.Currency = val.Value
		case "prices":
			book.Prices = p.positives(val, "prices", "GPU model", MaxPrice, "a list price > 0 for one whole GPU and one hour")
		case "tiers":
			book.Tiers = p.positives(val, "tiers", "tier", MaxMultiplier, "a multiplier > 0")
		case "sla":
			coldStart, jitter = p.sla(val)
		case "contracts":
			book.Contracts = p.contracts(val, "contracts")
		case "changes":
			book.Changes = p.changes(val)
		case "timezone":
			book.Location = p.timezone(val)
		case "costs":
			book.Costs, costsNode = p.costs(val), val
		default:
			p.fail(key, key.Value, "unknown field", "one of "+strings.Join(p.fields, ", "))
		}
	}
	for _, field := range []string{"version", "currency", "prices", "tiers"} {
		if !seen[field] && resolve(root).Kind == yaml.MappingNode && slices.Contains(p.fields, field) {
			p.fail(nil, field, "missing", p.expected)
		}
	}
	p.checkPriced(book)
	p.checkCosted(book, costsNode)
	book.ColdStart = p.limits(book, coldStart, "sla.cold_start.", "a duration > 0 such as 30s or 2m")
	book.JitterP99 = p.limits(book, jitter, "sla.jitter_p99.", "a duration > 0 such as 5ms")
	return book
}

// limits reads per-tier durations, each for a tier that tiers names.
func (p *parser) limits(book *PriceBook, nodes []namedNode, prefix, expected string) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, c := range nodes {
		tier, val := c.name, c.node
		field := prefix + tier
		if _, ok := book.Tiers[tier]; !ok && book.Tiers != nil {
			p.fail(val, field, "tier "+strconv.Quote(tier)+" is not in tiers", "a tier named in tiers ("+list(book.Tiers)+")")
			continue
		}
		d, err := time.ParseDuration(val.Value)
		if val.Kind != yaml.ScalarNode || val.Tag != "!!str" || err != nil || d <= 0 {
			p.fail(val, field, quote(val), expected)
			continue
		}
		out[tier] = d
	}
	return out
}

type namedNode struct {
	name string
	node *yaml.Node
}

func (p *parser) sla(n *yaml.Node) (coldStart, jitter []namedNode) {
	for key, val := range p.mapping(n, "sla", "a mapping with cold_start and/or jitter_p99") {
		switch key.Value {
		case "cold_start":
			for tier, d := range p.mapping(val, "sla.cold_start", "a mapping of tier to duration, e.g. {pro: 30s}") {
				coldStart = append(coldStart, namedNode{tier.Value, d})
			}
		case "jitter_p99":
			for tier, d := range p.mapping(val, "sla.jitter_p99", "a mapping of tier to duration, e.g. {pro: 5ms}") {
				jitter = append(jitter, namedNode{tier.Value, d})
			}
		default:
			p.fail(key, "sla."+key.Value, "unknown field", "cold_start or jitter_p99")
		}
	}
	return coldStart, jitter
}

// positives reads a mapping of names to numbers > 0 and ≤ most (prices, tiers).
func (p *parser) positives(n *yaml.Node, field, keyName string, most float64, expected string) map[string]float64 {
	out := map[string]float64{}
	for key, val := range p.mapping(n, field, "a mapping of "+keyName+" to number") {
		if v, ok := p.number(val, field+"."+key.Value, 0, false, most, expected); ok {
			out[key.Value] = v
		}
	}
	if len(out) == 0 && n.Kind == yaml.MappingNode && len(n.Content) == 0 {
		p.fail(n, field, "empty", "at least one "+keyName)
	}
	return out
}

// mapping yields a mapping node's key/value pairs (aliases resolved), reporting a node that is
// not a mapping, keys that are not plain names and keys given twice.
func (p *parser) mapping(n *yaml.Node, field, expected string) func(yield func(key, val *yaml.Node) bool) {
	return func(yield func(key, val *yaml.Node) bool) {
		n = resolve(n)
		if n.Kind != yaml.MappingNode {
			p.fail(n, field, quote(n), expected)
			return
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := resolve(n.Content[i]), resolve(n.Content[i+1])
			path := key.Value
			if field != "" {
				path = field + "." + key.Value
			}
			switch {
			case key.Kind != yaml.ScalarNode || key.Value == "":
				p.fail(key, field, "a key that is not a name", "names as keys")
				continue
			case seen[key.Value]:
				p.fail(key, path, "given twice", "each key once")
				continue
			}
			seen[key.Value] = true
			if !yield(key, val) {
				return
			}
		}
	}
}

func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// quote shows a value as written; a non-scalar is described instead.
func quote(n *yaml.Node) string {
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!null":
		return "an empty value"
	case n.Kind == yaml.ScalarNode:
		return strconv.Quote(n.Value)
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	default:
		return "an empty value"
	}
}

// contracts reads tenant → model → price.
func (p *parser) contracts(n *yaml.Node, field string) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for tenant, prices := range p.mapping(n, field, "a mapping of tenant to {GPU model: price}") {
		out[tenant.Value] = p.positives(prices, field+"."+tenant.Value, "GPU model", MaxPrice, "a contract price > 0 for one whole GPU and one hour")
	}
	return out
}

const expectedChange = "a mapping with effective (RFC 3339 time) and prices and/or contracts"

// changes reads the effective-dated changes; two at the same time are refused.
func (p *parser) changes(n *yaml.Node) []Change {
	n = resolve(n)
	if n.Kind != yaml.SequenceNode {
		p.fail(n, "changes", quote(n), "a list of changes, each "+expectedChange)
		return nil
	}
	var out []Change
	seen := map[time.Time]int{}
	for i, item := range n.Content {
		field := fmt.Sprintf("changes[%d]", i)
		var c Change
		hasEffective := false
		for key, val := range p.mapping(item, field, expectedChange) {
			switch key.Value {
			case "effective":
				t, err := time.Parse(time.RFC3339Nano, val.Value)
				if val.Kind != yaml.ScalarNode || (val.Tag != "!!str" && val.Tag != "!!timestamp") || err != nil {
					p.fail(val, field+".effective", quote(val), "an RFC 3339 time such as 2026-01-15T00:00:00Z")
					continue
				}
				if r := validate.CheckTime(field+".effective", quote(val), t); r != nil {
					// Before it becomes nanoseconds (which wrap after 2262 into another year).
					p.fail(val, r.Field, r.Value, r.Expected)
					continue
				}
				hasEffective = true
				c.Effective = t.UTC()
				if j, dup := seen[c.Effective]; dup {
					p.fail(val, field+".effective", quote(val), fmt.Sprintf("a time no other change has (changes[%d] has it)", j))
				}
				seen[c.Effective] = i
			case "prices":
				c.Prices = p.positives(val, field+".prices", "GPU model", MaxPrice, "a list price > 0 for one whole GPU and one hour")
			case "contracts":
				c.Contracts = p.contracts(val, field+".contracts")
			default:
				p.fail(key, field+"."+key.Value, "unknown field", "one of effective, prices, contracts")
			}
		}
		if !hasEffective && resolve(item).Kind == yaml.MappingNode {
			p.fail(item, field+".effective", "missing", "an RFC 3339 time such as 2026-01-15T00:00:00Z")
		}
		out = append(out, c)
	}
	return out
}

// checkPriced refuses contracts and changes for models that prices does not name: a model
// must have a list price from the beginning, so that capacity and list cost are defined.
func (p *parser) checkPriced(book *PriceBook) {
	if book.Prices == nil {
		return
	}
	check := func(field string, prices map[string]float64) {
		for _, model := range slices.Sorted(maps.Keys(prices)) {
			if _, ok := book.Prices[model]; !ok {
				p.fail(nil, field+"."+model, "model not in prices", "a GPU model that prices names ("+list(book.Prices)+")")
			}
		}
	}
	for _, tenant := range slices.Sorted(maps.Keys(book.Contracts)) {
		check("contracts."+tenant, book.Contracts[tenant])
	}
	if book.Costs != nil {
		check("costs.gpu_hour", book.Costs.GPUHour)
	}
	for i, c := range book.Changes {
		check(fmt.Sprintf("changes[%d].prices", i), c.Prices)
		for _, tenant := range slices.Sorted(maps.Keys(c.Contracts)) {
			check(fmt.Sprintf("changes[%d].contracts.%s", i, tenant), c.Contracts[tenant])
		}
	}
}

// checkCosted refuses costs that leave out a model of prices: that model's capacity would cost
// the operator nothing, and its margin be overstated without a sign of it. A GPU paid off
// says 0.
func (p *parser) checkCosted(book *PriceBook, n *yaml.Node) {
	if book.Costs == nil || book.Prices == nil {
		return
	}
	failed := map[string]bool{} // a cost given but refused already: one error is enough
	for _, err := range p.errs {
		if e, ok := err.(*Error); ok {
			failed[e.Field] = true
		}
	}
	for _, model := range slices.Sorted(maps.Keys(book.Prices)) {
		if _, ok := book.Costs.GPUHour[model]; !ok && !failed["costs.gpu_hour."+model] {
			p.fail(n, "costs.gpu_hour."+model, "missing (the model is in prices)",
				"a cost ≥ 0 of one whole GPU for one hour for every model of prices ("+list(book.Prices)+"), 0 for a GPU paid off")
		}
	}
}

const expectedCosts = "a mapping with gpu_hour ({GPU model: the operator's cost ≥ 0 of one whole GPU for one hour}) and/or energy_kwh (a price per kWh ≥ 0)"

// costs reads the operator's costs: per model a GPU-hour cost (0 allowed: a GPU paid off) and
// a price per kWh.
func (p *parser) costs(n *yaml.Node) *Costs {
	out := &Costs{GPUHour: map[string]float64{}}
	for key, val := range p.mapping(n, "costs", expectedCosts) {
		switch key.Value {
		case "gpu_hour":
			for model, v := range p.mapping(val, "costs.gpu_hour", "a mapping of GPU model to cost") {
				if f, ok := p.number(v, "costs.gpu_hour."+model.Value, 0, true, MaxPrice, "the operator's cost ≥ 0 of one whole GPU for one hour"); ok {
					out.GPUHour[model.Value] = f
				}
			}
		case "energy_kwh":
			if f, ok := p.number(val, "costs.energy_kwh", 0, true, MaxEnergyKWh, "a price per kWh ≥ 0"); ok {
				out.EnergyKWh = f
			}
		default:
			p.fail(key, "costs."+key.Value, "unknown field", "gpu_hour or energy_kwh")
		}
	}
	return out
}

// number reads a finite number above least (or equal to it, where orEqual) and at most most.
// A bound broken is named after what was expected; NaN and infinities, which YAML can write
// (.nan, .inf), are called what they are.
func (p *parser) number(val *yaml.Node, field string, least float64, orEqual bool, most float64, expected string) (float64, bool) {
	var v float64
	switch {
	case val.Kind != yaml.ScalarNode || (val.Tag != "!!int" && val.Tag != "!!float") || val.Decode(&v) != nil:
		if f, err := strconv.ParseFloat(val.Value, 64); val.Kind == yaml.ScalarNode && err == nil && (math.IsNaN(f) || math.IsInf(f, 0)) {
			expected = "a finite number, " + expected
		}
	case math.IsInf(v, 0) || math.IsNaN(v):
		expected = "a finite number, " + expected
	case v < least || (v == least && !orEqual):
	case v > most:
		expected = fmt.Sprintf("%s, at most %g", expected, most)
	default:
		return v, true
	}
	p.fail(val, field, quote(val), expected)
	return 0, false
}
