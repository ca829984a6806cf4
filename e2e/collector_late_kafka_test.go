package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestCollectorStartsBeforeKafka: a collector started while its broker is down keeps running,
// not ready (/readyz names Kafka), counting its attempts and logging them once per interval
// rather than once per attempt; once the broker is up it makes the topics, becomes ready and
// stores what is produced. On main it exited 1 within 0.04 s.
//
//	go test -count=1 -run TestCollectorStartsBeforeKafka ./e2e/
func TestCollectorStartsBeforeKafka(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	db := localtest.Database(t, localtest.DatabaseOptions{})
	kfk := localtest.NewKafka(t)
	if err := kfk.Stop(); err != nil {
		t.Fatal(err)
	}
	col := apptest.Start(t, ctx, apptest.Service{Command: "collector", NoReadyz: true, Args: []string{
		"--kafka.brokers", kfk.Brokers(), "--clickhouse.dsn", db.DSN, "--kafka.partitions", "2"}})
	readyz := func() (int, string) {
		resp, err := http.Get(col.URL("/readyz"))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Several attempts fail (back-off from 0.5 s): the collector is still there, not ready.
	col.WaitMetric(t, 60*time.Second, "slicemeter_collector_kafka_unreachable_total", 3)
	select {
	case <-col.Done():
		t.Fatalf("the collector exited without Kafka:\n%s", col.LogTail(20))
	default:
	}
	if code, body := readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, "kafka: ") {
		t.Errorf("/readyz while Kafka is down: %d %q; want 503 naming kafka", code, body)
	}
	if n := strings.Count(col.Log(), "Kafka cannot be reached"); n != 1 {
		t.Errorf("%d lines say Kafka cannot be reached after 3 attempts within a minute; want 1 (once per interval)\n%s", n, col.LogTail(20))
	}

	if err := kfk.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Log("Kafka started")
	apptest.WaitUntil(t, 90*time.Second, "the collector to be ready once Kafka is up", func() bool {
		code, _ := readyz()
		return code == http.StatusOK
	})
	if !col.LogContains("Kafka reached") {
		t.Errorf("no line says Kafka was reached:\n%s", col.LogTail(20))
	}
	b := faultBatch(0, 0)
	v, err := proto.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	w := kafkaconn.Cluster{Brokers: []string{kfk.Brokers()}}.NewWriter(pb.TopicSamples, nil)
	defer w.Close()
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte(b.Node), Value: v}); err != nil {
		t.Fatal(err)
	}
	col.WaitMetric(t, 90*time.Second, "slicemeter_collector_samples_stored_total", float64(len(b.Samples)))
	// A healthy pipeline on idle partitions warns of nothing: kafka-go's read timeouts on them
	// are debug.
	for _, l := range strings.Split(col.Log(), "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "error reading partition") {
			t.Errorf("a warning on a healthy pipeline: %s", l)
		}
	}
}
