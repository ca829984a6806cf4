package kafkaconn_test

import (
	"context"
	"fmt"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
)

func TestParseBrokers(t *testing.T) {
	for in, want := range map[string][]string{
		"":                       {},
		"a:9092":                 {"a:9092"},
		" a:9092, b:9092 ,,c:1 ": {"a:9092", "b:9092", "c:1"},
	} {
		if got := kafkaconn.ParseBrokers(in); !reflect.DeepEqual(got, want) {
			t.Errorf("ParseBrokers(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEnsureTopicsUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	err = kafkaconn.Cluster{Brokers: []string{addr}}.EnsureTopics(ctx, 1, "t")
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Fatalf("EnsureTopics on a closed port: %v", err)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("took %s", took)
	}
}

// TestKfake and TestKafka run the same produce / consumer-group / commit / restart sequence
// against kfake and a real Kafka broker.
func TestKfake(t *testing.T) {
	// A bare kfake, as the client meets a new cluster: no topic seeded, roundTrip creates its own.
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	roundTrip(t, cluster.ListenAddrs())
}

func TestKafka(t *testing.T) {
	// A broker of its own: roundTrip wants its topic empty, under -count too.
	roundTrip(t, kafkaconn.ParseBrokers(localtest.NewKafka(t).Brokers()))
}

func roundTrip(t *testing.T, brokers []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic, group = "roundtrip", "roundtrip-group"
	for range 2 { // creating, then finding it there
		if err := (kafkaconn.Cluster{Brokers: brokers}).EnsureTopics(ctx, 1, topic); err != nil {
			t.Fatalf("EnsureTopics: %v", err)
		}
	}

	w := kafkaconn.Cluster{Brokers: brokers}.NewWriter(topic, nil)
	defer w.Close()
	var msgs []kafka.Message
	for i := range 6 {
		msgs = append(msgs, kafka.Message{Key: []byte("node-a"), Value: []byte(fmt.Sprint(i))})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("write: %v", err)
	}
	start := time.Now()
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("node-a"), Value: []byte("6")}); err != nil {
		t.Fatalf("write: %v", err)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("one synchronous write took %s; BatchTimeout should keep it short", took)
	}

	r := kafkaconn.Cluster{Brokers: brokers}.NewGroupReader(group, nil, topic)
	var last kafka.Message
	for i := range 3 {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("fetch %d: %v", i, err)
		}
		if string(m.Value) != fmt.Sprint(i) {
			t.Fatalf("fetch %d: got %q", i, m.Value)
		}
		last = m
	}
	if err := r.CommitMessages(ctx, last); err != nil {
		t.Fatalf("commit: %v", err)
	}
	// Fetched but not committed: must come again after the restart.
	if _, err := r.FetchMessage(ctx); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("close reader: %v", err)
	}

	client := &kafka.Client{Addr: kafka.TCP(brokers...)}
	res, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: {0}}})
	if err != nil || res.Error != nil {
		t.Fatalf("offset fetch: %v %v", err, res.Error)
	}
	if got := res.Topics[topic][0].CommittedOffset; got != 3 {
		t.Errorf("committed offset %d, want 3", got)
	}

	r = kafkaconn.Cluster{Brokers: brokers}.NewGroupReader(group, nil, topic)
	defer r.Close()
	m, err := r.FetchMessage(ctx)
	if err != nil {
		t.Fatalf("fetch after restart: %v", err)
	}
	if m.Offset != 3 || string(m.Value) != "3" {
		t.Errorf("after restart got offset %d value %q, want the first uncommitted (3)", m.Offset, m.Value)
	}
}

// A topic's max.message.bytes as the broker says it: one set on the topic (kfake), and the
// real broker's default.
func TestTopicMaxMessageBytes(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name    string
		brokers []string
		set     string
		want    int64
	}{
		{"kfake", cluster.ListenAddrs(), "50000", 50000},
		{"kafka", kafkaconn.ParseBrokers(localtest.Kafka(t).Brokers()), "", 1048588},
	} {
		if err := (kafkaconn.Cluster{Brokers: tc.brokers}).EnsureTopics(ctx, 1, "maxbytes"); err != nil {
			t.Fatal(err)
		}
		if tc.set != "" {
			setTopicConfig(t, ctx, tc.brokers, "maxbytes", "max.message.bytes", tc.set)
		}
		got, err := kafkaconn.Cluster{Brokers: tc.brokers}.TopicMaxMessageBytes(ctx, "maxbytes")
		if err != nil || got != tc.want {
			t.Errorf("%s: max.message.bytes %d (%v), want %d", tc.name, got, err, tc.want)
		}
	}
}

func setTopicConfig(t *testing.T, ctx context.Context, brokers []string, topic, name, value string) {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(brokers...)}
	res, err := client.AlterConfigs(ctx, &kafka.AlterConfigsRequest{Resources: []kafka.AlterConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, Configs: []kafka.AlterConfigRequestConfig{{Name: name, Value: value}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Errors {
		if e != nil {
			t.Fatal(e)
		}
	}
}
