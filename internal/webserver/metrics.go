package webserver

import (
	"bytes"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"sync"

	"github.com/klauspost/compress/gzhttp"
	"github.com/klauspost/compress/gzip"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TextCollector is a collector that also writes its own families in the text formats, without
// the registry's per-scrape work: the exporter's snapshot (promcollector.Collector), most of
// whose scrape that work was. Its family and label names are legacy-valid.
type TextCollector interface {
	prometheus.Collector
	// AppendText appends its families in the text format (0.0.4) or, if openMetrics, in
	// OpenMetrics 1.0 without the closing "# EOF": what the registry would serve of it.
	AppendText(dst []byte, openMetrics bool) []byte
	// Has reports whether name is one of its families.
	Has(name string) bool
}

// MetricsHandler serves reg, and direct if not nil, on /metrics as promhttp does (OpenMetrics
// offered, promhttp's own metrics in reg), compressed at gzip's fastest level rather than
// promhttp's default level.
//
// Prometheus asks for gzip on every scrape, and for the 72-instance node (~930 series, 166 kB of
// text) compressing at the default level was a third of a scrape's CPU time; the fastest level
// (klauspost/compress) costs about a quarter of that, and the body grows from 10 kB to 11.5 kB
// (BenchmarkNode72Scrape). Clients that ask for zstd get it at its fastest level.
//
// direct must not be registered in reg. The text formats get reg's families through promhttp's
// encoder followed by direct's own text; any other format (protobuf), an escaping that would
// rename direct's series, or a family both serve goes through promhttp with direct gathered
// beside reg, which also reports the last as an error.
func MetricsHandler(reg *prometheus.Registry, direct TextCollector) (http.Handler, error) {
	compress, err := gzhttp.NewWrapper(gzhttp.CompressionLevel(gzip.BestSpeed))
	if err != nil {
		return nil, fmt.Errorf("setting up the compression of /metrics: %w", err)
	}
	opts := promhttp.HandlerOpts{Registry: reg, EnableOpenMetrics: true, DisableCompression: true}
	if direct == nil {
		return compress(promhttp.HandlerFor(reg, opts)), nil
	}
	own := prometheus.NewRegistry()
	if err := own.Register(direct); err != nil {
		return nil, fmt.Errorf("setting up /metrics: %w", err)
	}
	return compress(&directHandler{reg: reg, direct: direct, all: promhttp.HandlerFor(prometheus.Gatherers{reg, own}, opts),
		formats: expfmt.DefaultOpenMetricsAcceptedFormats()}), nil
}

type directHandler struct {
	reg    *prometheus.Registry
	direct TextCollector
	all    http.Handler // promhttp over reg and direct
	bufs   sync.Pool    // *[]byte: bodies, reused from scrape to scrape
	// formats are promhttp's with OpenMetrics enabled.
	formats []expfmt.Format
}

func (h *directHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	format := expfmt.NegotiateAccept(r.Header, h.formats...) // as promhttp negotiates
	om := format.FormatType() == expfmt.TypeOpenMetrics
	if !textFormat(format) {
		h.all.ServeHTTP(w, r)
		return
	}
	mfs, err := h.reg.Gather()
	if err != nil {
		h.all.ServeHTTP(w, r) // promhttp answers and counts the error
		return
	}
	bp, _ := h.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	defer h.bufs.Put(bp)
	body := bytes.NewBuffer((*bp)[:0])
	enc := expfmt.NewEncoder(body, format)
	for _, mf := range mfs {
		if h.direct.Has(mf.GetName()) {
			h.all.ServeHTTP(w, r)
			return
		}
		if err := enc.Encode(mf); err != nil {
			h.all.ServeHTTP(w, r)
			return
		}
	}
	b := h.direct.AppendText(body.Bytes(), om)
	if om {
		b = append(b, "# EOF\n"...)
	}
	*bp = b
	w.Header().Add("Vary", "Accept")
	w.Header().Set("Content-Type", string(format))
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b) // the client went away: nothing to do
}

// textFormat reports whether format is one the direct path writes: the text format or
// OpenMetrics 1.0 (or 0.0.1), with an escaping that leaves legacy-valid names as they are
// (dots escaping doubles their underscores).
func textFormat(format expfmt.Format) bool {
	switch format.FormatType() {
	case expfmt.TypeTextPlain:
	case expfmt.TypeOpenMetrics:
		if _, params, err := mime.ParseMediaType(string(format)); err != nil || params["version"] == expfmt.OpenMetricsVersion_2_0_0 {
			return false
		}
	default:
		return false
	}
	return format.ToEscapingScheme() != model.DotsEscaping
}
