package webserver

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/common/version"
)

// Every role's registry carries slicemeter_build_info with the build's version labels.
func TestNewRegistryHasBuildInfo(t *testing.T) {
	mfs, err := NewRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "slicemeter_build_info" {
			continue
		}
		labels := map[string]string{}
		for _, l := range mf.GetMetric()[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["version"] != version.Version || labels["revision"] != version.GetRevision() || labels["goversion"] == "" {
			t.Errorf("slicemeter_build_info labels %v", labels)
		}
		if v := mf.GetMetric()[0].GetGauge().GetValue(); v != 1 {
			t.Errorf("slicemeter_build_info = %v, want 1", v)
		}
		return
	}
	t.Error("no slicemeter_build_info in NewRegistry's metrics")
}

// /readyz says what is missing, one line each, with 503; 200 once nothing is.
func TestReadyzSaysWhatIsMissing(t *testing.T) {
	var started atomic.Bool
	var missing []string
	o := Options{Ready: &started, Missing: func() []string { return missing }}
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		o.readyz(rec, httptest.NewRequest("GET", "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "not started yet") {
		t.Errorf("before start: %d %q", code, body)
	}
	started.Store(true)
	missing = []string{"kafka: dial tcp 127.0.0.1:9092: connection refused (3 batches queued)"}
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "connection refused (3 batches queued)") || strings.Contains(body, "not started") {
		t.Errorf("without Kafka: %d %q", code, body)
	}
	missing = nil
	if code, body := get(); code != http.StatusOK || body != "ready\n" {
		t.Errorf("ready: %d %q", code, body)
	}
}
