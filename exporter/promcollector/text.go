package promcollector

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The snapshot is most of a scrape: ~1500 of a 72-instance node's ~1700 series. Gathered
// through the registry, every scrape turns each series into a dto.Metric, checks its
// consistency, hashes and sorts it, and the encoder escapes each label value again: most of a
// scrape, and the 1 Hz scrapes were nearly half of the exporter's CPU. AppendText writes the same
// lines straight from label text built once per series, the only per-scrape work being the
// values. TestTextEqualsRegistry holds the two paths to the same bytes, in both text formats.

// family is one metric family of the snapshot.
type family struct {
	desc    *prometheus.Desc
	name    string
	counter bool
	index   int // in families
	// head and headOM are the family's # HELP and # TYPE lines in the text format (0.0.4, as
	// expfmt.MetricFamilyToText writes them) and in OpenMetrics 1.0
	// (expfmt.MetricFamilyToOpenMetrics).
	head, headOM string
}

func gauge(name, help string, labels []string) *family {
	return newFamily(name, help, labels, false)
}

func counter(name, help string, labels []string) *family {
	return newFamily(name, help, labels, true)
}

func newFamily(name, help string, labels []string, isCounter bool) *family {
	typ, omName, omType := "gauge", name, "gauge"
	if isCounter {
		typ, omType = "counter", "unknown"
		if base, ok := strings.CutSuffix(name, "_total"); ok {
			omName, omType = base, "counter"
		}
	}
	return &family{
		desc: prometheus.NewDesc(name, help, labels, nil), name: name, counter: isCounter,
		head:   "# HELP " + name + " " + helpEscaper.Replace(help) + "\n# TYPE " + name + " " + typ + "\n",
		headOM: "# HELP " + omName + " " + quotedEscaper.Replace(help) + "\n# TYPE " + omName + " " + omType + "\n",
	}
}

var (
	helpEscaper   = strings.NewReplacer("\\", `\\`, "\n", `\n`)
	quotedEscaper = strings.NewReplacer("\\", `\\`, "\n", `\n`, "\"", `\"`)
)

// indexed sorts the families by name, as the registry orders them, and numbers them.
func indexed(fams ...*family) []*family {
	slices.SortFunc(fams, func(a, b *family) int { return strings.Compare(a.name, b.name) })
	for i, f := range fams {
		f.index = i
	}
	return fams
}

// labelSet is one series' label pairs (the registry's path) and the same pairs as the text
// formats write them, braces included.
type labelSet struct {
	pairs []*dto.LabelPair
	text  string
}

// newLabelSet pairs f's variable labels with values. A value that is not valid UTF-8 (NVML's
// strings, a replayed capture's) is served with U+FFFD in place of its bad bytes: as it came,
// the registry would refuse the whole scrape for it.
func newLabelSet(f *family, values []string) *labelSet {
	pairs := prometheus.MakeLabelPairs(f.desc, values)
	for _, p := range pairs {
		if v := p.GetValue(); !utf8.ValidString(v) {
			clean := strings.ToValidUTF8(v, "\uFFFD")
			p.Value = &clean
		}
	}
	var b strings.Builder
	sep := byte('{')
	for _, p := range pairs {
		b.WriteByte(sep)
		sep = ','
		b.WriteString(p.GetName())
		b.WriteString(`="`)
		quotedEscaper.WriteString(&b, p.GetValue()) //nolint:errcheck // a strings.Builder does not fail
		b.WriteByte('"')
	}
	if len(pairs) > 0 {
		b.WriteByte('}')
	}
	return &labelSet{pairs: pairs, text: b.String()}
}

// out receives the snapshot's series in Collect's order: a family's series are in the order
// the registry sorts them, the families interleaved.
type out interface {
	add(f *family, v float64, ls *labelSet)
}

// registryOut turns each series into a const metric for the registry.
type registryOut struct {
	ch chan<- prometheus.Metric
	m  *metrics
}

func (o registryOut) add(f *family, v float64, ls *labelSet) {
	if f.counter {
		o.ch <- o.m.counter(f.desc, v, ls.pairs)
	} else {
		o.ch <- o.m.gauge(f.desc, v, ls.pairs)
	}
}

// textOut appends each series' line to its family's buffer.
type textOut struct {
	bufs [][]byte // by family index
	om   bool
}

func (o *textOut) add(f *family, v float64, ls *labelSet) {
	b := append(o.bufs[f.index], f.name...)
	b = append(b, ls.text...)
	b = append(b, ' ')
	b = appendValue(b, v, o.om)
	o.bufs[f.index] = append(b, '\n')
}

// appendValue formats v as expfmt's writeFloat (text) and writeOpenMetricsFloat (OpenMetrics).
func appendValue(b []byte, v float64, om bool) []byte {
	switch {
	case v == 1 || v == 0 || v == -1:
		b = strconv.AppendInt(b, int64(v), 10)
		if om {
			b = append(b, ".0"...)
		}
		return b
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	}
	n := len(b)
	b = strconv.AppendFloat(b, v, 'g', -1, 64)
	if om && !bytes.ContainsAny(b[n:], "e.") {
		b = append(b, ".0"...)
	}
	return b
}

// AppendText appends the snapshot's families to dst in the text format (0.0.4) or, if
// openMetrics, in OpenMetrics 1.0 without its closing "# EOF": the same bytes as the
// registry's Gather encoded by expfmt, families sorted by name, none without series.
func (s *Collector) AppendText(dst []byte, openMetrics bool) []byte {
	o, _ := s.scratch.Get().(*textOut)
	if o == nil {
		o = &textOut{bufs: make([][]byte, len(families))}
	}
	for i := range o.bufs {
		o.bufs[i] = o.bufs[i][:0]
	}
	o.om = openMetrics
	s.mu.RLock()
	s.emit(o)
	s.mu.RUnlock()
	for i, b := range o.bufs {
		if len(b) == 0 {
			continue
		}
		if openMetrics {
			dst = append(dst, families[i].headOM...)
		} else {
			dst = append(dst, families[i].head...)
		}
		dst = append(dst, b...)
	}
	s.scratch.Put(o)
	return dst
}

// Has reports whether name is one of the snapshot's families.
func (s *Collector) Has(name string) bool {
	_, ok := slices.BinarySearchFunc(families, name, func(f *family, name string) int { return strings.Compare(f.name, name) })
	return ok
}
