package collector

import (
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestShareSamples: a share instance's replica count is stored in the samples and both
// rollups (attribution bills 1/share_replicas from them), and share samples without a sane
// count are dead-lettered with the field, the rest of their batch stored.
func TestShareSamples(t *testing.T) {
	brokers := localtest.FakeKafka(t)
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn

	share := func(id string, replicas uint32) *pb.Sample {
		s := sample(pb.Kind_KIND_SHARE, id, base)
		s.ShareReplicas = replicas
		return s
	}
	onGPU := sample(pb.Kind_KIND_GPU, "gpu1", base)
	onGPU.ShareReplicas = 2 // only share instances are replicas
	produce(t, brokers, sampleMessage(t, &pb.SampleBatch{Node: "node-a", Seq: 1, Samples: []*pb.Sample{
		share("gpu0/share0", 4), share("gpu0/share1", 0), share("gpu0/share2", 5000), onGPU, share("gpu0/share3", 4),
	}}))
	c, _, stop := startCollector(t, Config{Brokers: brokers, GroupID: "share", FlushInterval: 100 * time.Millisecond}, conn)
	defer stop()
	waitFor(t, 20*time.Second, "2 samples stored", func() bool {
		s, _ := c.Stored()
		return s == 2
	})
	for _, table := range []string{"samples", "samples_1s", "samples_1m"} {
		// The rollups are rewritten after the raw rows' insert: wait for them.
		var n, bad uint64
		waitFor(t, 20*time.Second, table+" rows of both replicas", func() bool {
			err := conn.QueryRow(t.Context(), "SELECT uniqExact(instance_id), countIf(kind != 'share' OR share_replicas != 4) FROM "+table).Scan(&n, &bad)
			if err != nil {
				t.Fatal(err)
			}
			return n == 2
		})
		if bad != 0 {
			t.Errorf("%s: %d rows not of kind share with 4 replicas", table, bad)
		}
	}
	// One dead letter per batch, naming the first refused sample's field.
	for _, m := range readDeadLetters(t, brokers, 1) {
		if r, f := header(m, HeaderReason), header(m, HeaderField); r != reasonInvalid || f != "share_replicas" {
			t.Errorf("dead letter: reason %q field %q, want %q on share_replicas", r, f, reasonInvalid)
		}
	}
}
