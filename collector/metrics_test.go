package collector

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// The drop and dead-letter counters exist at 0 from the start for every known reason, so the
// dead-letter alert fires on the first one.
func TestDropAndDeadLetterSeriesExistFromTheStart(t *testing.T) {
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ topic, reason string }{
		{pb.TopicSamples, reasonDecode}, {pb.TopicSamples, reasonInvalid}, {pb.TopicSamples, reasonMissingNode},
		{pb.TopicAllocations, reasonDecode}, {pb.TopicAllocations, reasonOverlap}, {pb.TopicAllocations, reasonMissingTenant},
		{pb.TopicAllocations, reasonTenantMove},
	} {
		if v := testutil.ToFloat64(m.deadLettered.WithLabelValues(tc.topic, tc.reason)); v != 0 {
			t.Errorf("deadlettered_total{topic=%q,reason=%q} = %v", tc.topic, tc.reason, v)
		}
	}
	if got := testutil.CollectAndCount(m.deadLettered); got != 2+7+10 {
		t.Errorf("%d deadlettered_total series at start, want 19", got)
	}
	if got := testutil.CollectAndCount(m.samplesDropped); got != 7 {
		t.Errorf("%d samples_dropped_total series at start, want 7", got)
	}
}

// The collector's metrics pass promtool check metrics (names, units, help), the energy
// estimate's counter included.
func TestMetricsPassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if testing.Short() {
			t.Skip("promtool not installed")
		}
		t.Fatal("promtool not found: run make deps (Debian package prometheus)")
	}
	reg := prometheus.NewPedanticRegistry()
	m, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.energyEstimated.Add(3)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	found := false
	for _, f := range families {
		found = found || f.GetName() == "slicemeter_collector_samples_energy_estimated_total"
		if _, err := expfmt.MetricFamilyToText(&text, f); err != nil {
			t.Fatal(err)
		}
	}
	if !found {
		t.Error("slicemeter_collector_samples_energy_estimated_total not served")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(text.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
