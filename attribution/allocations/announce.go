package allocations

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// Announce publishes events on the allocations topic, keyed by tenant, as a scheduler does:
// the collector stores them after its checks (the demo announces its scenario's this way).
func Announce(ctx context.Context, kc kafkaconn.Cluster, events []*pb.AllocationEvent, logger *slog.Logger) error {
	w := kc.NewWriter(pb.TopicAllocations, logger)
	defer w.Close()
	msgs := make([]kafka.Message, 0, len(events))
	for _, e := range events {
		v, err := proto.Marshal(e)
		if err != nil {
			return fmt.Errorf("encoding allocation %s: %w", e.AllocationId, err)
		}
		msgs = append(msgs, kafka.Message{Key: []byte(e.Tenant), Value: v})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		return fmt.Errorf("publishing %d allocations to %s: %w", len(msgs), pb.TopicAllocations, err)
	}
	return nil
}
