package localtest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/slicemeter/slicemeter/deploy/local"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// FakeKafka is an in-process fake Kafka (kfake) for t, closed when t ends, and its broker
// addresses: one broker with slicemeter's topics (samples, allocations, dead letters) of one
// partition each; opts come after those defaults and so override them. It starts no
// process, so unlike the real services it runs under -short too.
func FakeKafka(t testing.TB, opts ...kfake.Opt) []string {
	t.Helper()
	all := append([]kfake.Opt{kfake.NumBrokers(1),
		kfake.SeedTopics(1, pb.TopicSamples, pb.TopicAllocations, pb.TopicDeadLetter)}, opts...)
	cluster, err := kfake.NewCluster(all...)
	if err != nil {
		t.Fatalf("starting a fake Kafka (kfake): %v", err)
	}
	t.Cleanup(cluster.Close)
	return cluster.ListenAddrs()
}

// CheckWithChDB has chDB (current ClickHouse, through python) run the SQL files; it fails t
// with what chDB said. Skipped under -short: it starts a python process with ClickHouse in it.
func CheckWithChDB(t testing.TB, sqlFiles ...string) {
	t.Helper()
	SkipShort(t, "chDB (python)")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := local.CheckWithChDB(ctx, sqlFiles...); err != nil {
		t.Fatal(err)
	}
}
