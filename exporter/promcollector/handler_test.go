package promcollector

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/slicemeter/slicemeter/internal/webserver"
)

func TestHandler(t *testing.T) {
	_, reg := fleet(t, "vgpu-timeslice")
	h, err := webserver.MetricsHandler(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, accept, encoding string
		wantType, wantEncoding string
	}{
		{"prometheus", "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.2,*/*;q=0.1", "gzip",
			"application/openmetrics-text", "gzip"},
		{"curl", "", "", "text/plain", ""},
		{"text, gzip", "text/plain;version=0.0.4", "gzip", "text/plain", "gzip"},
		{"gzip refused", "", "gzip;q=0, identity", "text/plain", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			if tc.accept != "" {
				req.Header.Set("Accept", tc.accept)
			}
			if tc.encoding != "" {
				req.Header.Set("Accept-Encoding", tc.encoding)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			res := rec.Result()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d", res.StatusCode)
			}
			if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.wantType) {
				t.Errorf("Content-Type %q, want %s", ct, tc.wantType)
			}
			if ce := res.Header.Get("Content-Encoding"); ce != tc.wantEncoding {
				t.Fatalf("Content-Encoding %q, want %q", ce, tc.wantEncoding)
			}
			body := io.Reader(res.Body)
			if tc.wantEncoding == "gzip" {
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
			text := string(raw)
			if !strings.Contains(text, `slicemeter_instance_info{gpu="0",gpu_instance_id="",kind="vgpu",model="H100-SXM5-80GB",node="node-v",profile="H100-20C",slice="gpu0/vgpu3"`) {
				t.Errorf("the body lacks the instances:\n%.2000s", text)
			}
			if strings.HasPrefix(tc.wantType, "application/openmetrics-text") != strings.HasSuffix(text, "# EOF\n") {
				t.Errorf("OpenMetrics %v, yet the body ends with %q", tc.wantType, text[max(0, len(text)-20):])
			}
			if tc.wantType != "text/plain" {
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
