// Package publish sends every sample to Kafka: one SampleBatch per node per flush on
// slicemeter.samples.v1, keyed by node.
package publish

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/exporter"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// MessageWriter is the part of kafka.Writer the publisher uses.
type MessageWriter interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// Publisher buffers a flush interval of samples and writes them as one batch per node.
type Publisher struct {
	w          MessageWriter
	topic      string
	exporterID string
	logger     *slog.Logger
	retries    int
	backoff    time.Duration

	mu      sync.Mutex
	pending map[string][]*pb.Sample
	order   []string // nodes in first-seen order, so batches keep a stable order
	seq     uint64

	published prometheus.Counter
	batches   prometheus.Counter
	errors    prometheus.Counter
	dropped   *prometheus.CounterVec
	bytes     prometheus.Counter
}

var _ exporter.Sink = (*Publisher)(nil)

// New returns a publisher writing to topic through w. Messages of a flush that still fail after
// the retries are dropped and counted in slicemeter_exporter_samples_dropped_total.
func New(w MessageWriter, topic string, reg prometheus.Registerer, logger *slog.Logger) *Publisher {
	host, _ := os.Hostname()
	p := &Publisher{
		w: w, topic: topic, logger: logger, retries: 5, backoff: 200 * time.Millisecond,
		exporterID: fmt.Sprintf("%s/%d/%d", host, os.Getpid(), time.Now().UnixNano()),
		pending:    map[string][]*pb.Sample{},
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slicemeter_exporter_samples_published_total", Help: "Samples written to Kafka.",
		}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slicemeter_exporter_batches_published_total", Help: "SampleBatch messages written to Kafka.",
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slicemeter_exporter_publish_errors_total", Help: "Failed Kafka writes (each retry counts).",
		}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slicemeter_exporter_samples_dropped_total", Help: "Samples that could not be delivered, by reason.",
		}, []string{"reason"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slicemeter_exporter_published_bytes_total", Help: "Encoded SampleBatch bytes written to Kafka (before compression).",
		}),
	}
	if reg != nil {
		reg.MustRegister(p.published, p.batches, p.errors, p.dropped, p.bytes)
	}
	return p
}

// Write buffers a tick's samples until the next Flush.
func (p *Publisher) Write(_ context.Context, _ time.Time, samples []exporter.NodeSamples) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ns := range samples {
		if _, ok := p.pending[ns.Node]; !ok {
			p.order = append(p.order, ns.Node)
		}
		p.pending[ns.Node] = append(p.pending[ns.Node], ns.Samples...)
	}
	return nil
}

// Flush writes the buffered samples, one message per node, retrying with backoff.
func (p *Publisher) Flush(ctx context.Context) error {
	p.mu.Lock()
	msgs := make([]kafka.Message, 0, len(p.order))
	count := 0
	for _, node := range p.order {
		samples := p.pending[node]
		if len(samples) == 0 {
			continue
		}
		p.seq++
		value, err := proto.Marshal(&pb.SampleBatch{Node: node, Seq: p.seq, ExporterId: p.exporterID, Samples: samples})
		if err != nil {
			p.mu.Unlock()
			return fmt.Errorf("encoding the batch of node %s: %w", node, err)
		}
		msgs = append(msgs, kafka.Message{Topic: p.topic, Key: []byte(node), Value: value})
		count += len(samples)
		p.pending[node] = samples[:0:0]
	}
	p.mu.Unlock()
	if len(msgs) == 0 {
		return nil
	}
	var err error
	for attempt := 0; attempt <= p.retries; attempt++ {
		if err = p.w.WriteMessages(ctx, msgs...); err == nil {
			p.published.Add(float64(count))
			p.batches.Add(float64(len(msgs)))
			for _, m := range msgs {
				p.bytes.Add(float64(len(m.Value)))
			}
			return nil
		}
		p.errors.Inc()
		if ctx.Err() != nil {
			break
		}
		p.logger.Warn("writing samples to Kafka failed; retrying", "attempt", attempt+1, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(p.backoff << attempt):
		}
	}
	p.dropped.WithLabelValues("kafka_unavailable").Add(float64(count))
	return fmt.Errorf("writing %d samples to Kafka topic %s (dropped): %w", count, p.topic, err)
}
