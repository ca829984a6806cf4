package collector

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestAgainstKafka runs the collector against a real Kafka broker, with topics it creates
// itself (2 partitions each), and checks storage, dead letters and commits.
func TestAgainstKafka(t *testing.T) {
	brokers := kafkaBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn

	const group = "real-kafka"
	c, reg, stop := startCollector(t, Config{Brokers: brokers, GroupID: group, TopicPartitions: 2,
		FlushInterval: 100 * time.Millisecond}, conn)
	waitFor(t, 30*time.Second, "topics created", func() bool {
		client := &kafka.Client{Addr: kafka.TCP(brokers...)}
		meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{pb.TopicSamples, pb.TopicDeadLetter}})
		return err == nil && meta.Topics[0].Error == nil && meta.Topics[1].Error == nil
	})
	var msgs []kafka.Message
	for _, node := range []string{"node-a", "node-b", "node-c", "node-d"} {
		msgs = append(msgs, sampleMessage(t, &pb.SampleBatch{Node: node, Samples: []*pb.Sample{
			sample(pb.Kind_KIND_GPU, "gpu0", base), sample(pb.Kind_KIND_MIG, "gpu1/mig0", base),
		}}))
	}
	msgs = append(msgs, kafka.Message{Topic: pb.TopicSamples, Key: []byte("node-x"), Value: []byte("\xff\xff")})
	produce(t, brokers, msgs...)

	waitFor(t, 30*time.Second, "8 samples stored", func() bool { s, _ := c.Stored(); return s == 8 })
	waitFor(t, 10*time.Second, "5 messages committed", func() bool {
		return committedTotal(t, brokers, group, pb.TopicSamples, 2) == 5
	})
	dead := readDeadLettersAllPartitions(t, brokers, 2, 1)
	if header(dead[0], HeaderReason) != reasonDecode || string(dead[0].Key) != "node-x" {
		t.Errorf("dead letter %v", dead[0].Headers)
	}
	if got := metricValue(t, reg, "slicemeter_collector_deadlettered_total",
		map[string]string{"topic": pb.TopicSamples, "reason": reasonDecode}); got != 1 {
		t.Errorf("deadlettered_total = %v", got)
	}
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// committedTotal sums the committed offsets of partitions 0..partitions-1 of topic.
func committedTotal(t testing.TB, brokers []string, group, topic string, partitions int) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ids := make([]int, partitions)
	for i := range ids {
		ids[i] = i
	}
	client := &kafka.Client{Addr: kafka.TCP(brokers...)}
	res, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ids}})
	if err != nil || res.Error != nil {
		t.Fatalf("offset fetch: %v %v", err, res.Error)
	}
	var total int64
	for _, p := range res.Topics[topic] {
		if p.CommittedOffset > 0 {
			total += p.CommittedOffset
		}
	}
	return total
}

// readDeadLettersAllPartitions reads n dead letters through a throwaway consumer group.
func readDeadLettersAllPartitions(t testing.TB, brokers []string, partitions, n int) []kafka.Message {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, GroupID: "dead-letter-reader", Topic: pb.TopicDeadLetter,
		StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var msgs []kafka.Message
	for range n {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("read dead letter %d of %d: %v", len(msgs)+1, n, err)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// kafkaBroker is the addresses of a real Kafka broker of t's own: its users create the
// topics with partition counts of their own, which a shared broker would already hold.
func kafkaBroker(t testing.TB) []string {
	t.Helper()
	return kafkaconn.ParseBrokers(localtest.NewKafka(t).Brokers())
}
