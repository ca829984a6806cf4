package collector

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

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
