package webserver

import (
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
