package promcollector

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/model"

	"github.com/slicemeter/slicemeter/internal/webserver"
)

// served is a fleet's registry and snapshot as cmd/slicemeter serves them: the snapshot beside
// the registry (webserver.MetricsHandler's direct path), with the Go and process collectors;
// and a reference handler, promhttp over both.
func served(t *testing.T, name string) (h, ref http.Handler, snap *Collector, reg *prometheus.Registry) {
	t.Helper()
	snap, reg = fleet(t, name)
	reg.Unregister(snap)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	h, err := webserver.MetricsHandler(reg, snap)
	if err != nil {
		t.Fatal(err)
	}
	own := prometheus.NewRegistry()
	own.MustRegister(snap)
	ref = promhttp.HandlerFor(prometheus.Gatherers{reg, own}, promhttp.HandlerOpts{EnableOpenMetrics: true, DisableCompression: true})
	return h, ref, snap, reg
}

func get(t *testing.T, h http.Handler, accept, encoding string) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if encoding != "" {
		req.Header.Set("Accept-Encoding", encoding)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res := rec.Result()
	body := io.Reader(res.Body)
	if res.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(raw)
}

const (
	acceptPrometheus = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.2,*/*;q=0.1"
	acceptProtobuf   = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"
)

func TestHandler(t *testing.T) {
	h, ref, _, _ := served(t, "vgpu-timeslice")
	for _, tc := range []struct {
		name, accept, encoding string
		wantType, wantEncoding string
	}{
		{"prometheus", acceptPrometheus, "gzip", "application/openmetrics-text; version=1.0.0", "gzip"},
		{"curl", "", "", "text/plain; version=0.0.4", ""},
		{"text, gzip", "text/plain;version=0.0.4", "gzip", "text/plain; version=0.0.4", "gzip"},
		{"gzip refused", "", "gzip;q=0, identity", "text/plain; version=0.0.4", ""},
		{"openmetrics 0.0.1", "application/openmetrics-text;version=0.0.1", "", "application/openmetrics-text; version=0.0.1", ""},
		{"utf-8 names allowed", "text/plain;version=0.0.4;escaping=allow-utf-8", "", "text/plain; version=0.0.4; charset=utf-8; escaping=allow-utf-8", ""},
		{"protobuf", acceptProtobuf, "", "application/vnd.google.protobuf", ""},
		{"dots escaping", "text/plain;version=0.0.4;escaping=dots", "", "text/plain; version=0.0.4; charset=utf-8; escaping=dots", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, text := get(t, h, tc.accept, tc.encoding)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", res.StatusCode, text)
			}
			if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.wantType) {
				t.Errorf("Content-Type %q, want %s", ct, tc.wantType)
			}
			if ce := res.Header.Get("Content-Encoding"); ce != tc.wantEncoding {
				t.Fatalf("Content-Encoding %q, want %q", ce, tc.wantEncoding)
			}
			_, want := get(t, ref, tc.accept, "")
			if tc.wantType == "application/vnd.google.protobuf" {
				if !strings.Contains(text, "slicemeter_instance_info") || len(text) < len(want)/2 {
					t.Errorf("the protobuf body (%d bytes) lacks the snapshot (promhttp's: %d bytes)", len(text), len(want))
				}
				return
			}
			// The same families as promhttp serves; the snapshot's byte for byte (the others'
			// values move between two scrapes).
			got, wantFams := familyBlocks(text), familyBlocks(want)
			if !slices.Equal(sortedKeys(got), sortedKeys(wantFams)) {
				t.Fatalf("families %v, promhttp serves %v", sortedKeys(got), sortedKeys(wantFams))
			}
			n := 0
			for name, block := range got {
				if snapshotFamily(name) {
					n++
					if block != wantFams[name] {
						t.Errorf("%s differs from promhttp's:\n%s", name, lineDiff(wantFams[name], block))
					}
				}
			}
			if n < 10 {
				t.Errorf("only %d of the snapshot's families in %q", n, text[:min(len(text), 2000)])
			}
			if !strings.Contains(text, `slicemeter_instance_info{gpu="0",gpu_instance_id="",kind="vgpu",model="H100-SXM5-80GB",node="node-v",profile="H100-20C",slice="gpu0/vgpu3"`) &&
				tc.name != "dots escaping" {
				t.Errorf("the body lacks the instances:\n%.2000s", text)
			}
			if strings.HasPrefix(tc.wantType, "application/openmetrics-text") != strings.HasSuffix(text, "# EOF\n") {
				t.Errorf("OpenMetrics %v, yet the body ends with %q", tc.wantType, text[max(0, len(text)-20):])
			}
			if tc.wantType != "text/plain; version=0.0.4" {
				return
			}
			promtool, err := exec.LookPath("promtool")
			if err != nil {
				t.Skip("promtool not installed")
			}
			cmd := exec.Command(promtool, "check", "metrics")
			cmd.Stdin = strings.NewReader(text)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("promtool check metrics: %v\n%s", err, out)
			}
		})
	}
}

// A family that both the registry and the snapshot serve is an error promhttp reports (500,
// naming it), not a body with the family twice.
func TestHandlerFamilyServedTwice(t *testing.T) {
	h, _, _, reg := served(t, "mig-basic")
	reg.MustRegister(unchecked{prometheus.MustNewConstMetric(prometheus.NewDesc("slicemeter_instance_info", "twice", nil, nil), prometheus.GaugeValue, 1)})
	for _, accept := range []string{"", acceptPrometheus, acceptProtobuf} {
		res, text := get(t, h, accept, "")
		if res.StatusCode != http.StatusInternalServerError || !strings.Contains(text, "slicemeter_instance_info") {
			t.Errorf("Accept %q: status %d, %q; want 500 naming slicemeter_instance_info", accept, res.StatusCode, text[:min(len(text), 300)])
		}
	}
}

// snapshotFamily reports whether name (as a # HELP line has it, in any format or escaping) is
// one of the snapshot's families.
func snapshotFamily(name string) bool {
	for _, f := range families {
		for _, n := range []string{f.name, strings.TrimSuffix(f.name, "_total")} {
			if name == n || name == model.EscapeName(n, model.DotsEscaping) {
				return true
			}
		}
	}
	return false
}

// unchecked is a collector the registry cannot check at registration: it describes nothing.
type unchecked struct{ m prometheus.Metric }

func (unchecked) Describe(chan<- *prometheus.Desc)      {}
func (u unchecked) Collect(ch chan<- prometheus.Metric) { ch <- u.m }

// familyBlocks splits an exposition into its families' lines, by the name in their # TYPE line
// (# EOF left out).
func familyBlocks(text string) map[string]string {
	blocks := map[string]string{}
	name := ""
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, "# HELP ") {
			name = strings.Fields(line)[2]
		}
		if line == "# EOF\n" {
			continue
		}
		blocks[name] += line
	}
	return blocks
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
