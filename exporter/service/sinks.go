package service

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/trace"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/exporter/publish"
	"github.com/slicemeter/slicemeter/exporter/summary"
	"github.com/slicemeter/slicemeter/internal/usage"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// openSinks returns the snapshot served on /metrics, the Kafka publisher with brokers, and the summary
// if one is asked for. The publisher is always there to Run and Drain: without brokers it is one
// with nothing to send. closeSinks closes the Kafka writer and the spool.
func (s *Service) openSinks(tp trace.TracerProvider) (sinks []exporter.Sink, pub *publish.Publisher, closeSinks func(), err error) {
	sinks = []exporter.Sink{s.snap}
	// Run and Drain of a publisher without a writer or queue return at once.
	if pub, err = publish.New(nil, pb.TopicSamples, nil, s.logger, publish.Options{}); err != nil {
		return nil, nil, nil, err
	}
	closeSinks = func() {}
	if brokers := s.cfg.Brokers; len(brokers) > 0 {
		if pub, closeSinks, err = s.openPublisher(tp); err != nil {
			return nil, nil, nil, err
		}
		sinks = append(sinks, pub)
	}
	if s.cfg.Summary != "" {
		sinks = append(sinks, summary.New(s.cfg.Summary))
	}
	return sinks, pub, closeSinks, nil
}

// openPublisher opens the spool (or the memory queue) and returns the publisher. Kafka need not
// be there: the publisher's sender makes sure the samples topic exists once it is, and batches
// wait in the queue meanwhile.
func (s *Service) openPublisher(tp trace.TracerProvider) (*publish.Publisher, func(), error) {
	w := s.kafka.NewWriter("", s.logger)
	// A flush is one message per node, already a batch: send it at once rather than waiting
	// BatchTimeout for more messages that will not come.
	w.BatchSize = 1
	// The broker's limit decides (batches are split to fit it), not the client's 1 MB default.
	w.BatchBytes = 64 << 20
	var pub *publish.Publisher
	opts := publish.Options{SpoolDir: s.cfg.SpoolDir, SpoolMaxBytes: s.cfg.SpoolMaxBytes, Tracer: tp,
		MemoryQueueBytes: s.cfg.QueueMaxBytes, MaxMessageBytes: s.cfg.MaxMessageBytes,
		Prepare: func(ctx context.Context) error {
			if err := s.kafka.EnsureTopics(ctx, s.cfg.Partitions, pb.TopicSamples); err != nil {
				return err
			}
			if s.cfg.MaxMessageBytes > 0 {
				return nil
			}
			n, err := s.kafka.TopicMaxMessageBytes(ctx, pb.TopicSamples)
			if err != nil {
				// Not fatal: a batch Kafka refuses as too large is split on the way out.
				s.logger.Warn("the samples topic's max.message.bytes is unknown; batches are split when Kafka refuses them", "err", err)
				return nil
			}
			pub.SetMaxMessageBytes(n)
			s.logger.Info("samples topic", "topic", pb.TopicSamples, "max_message_bytes", n)
			return nil
		}}
	pub, err := publish.New(w, pb.TopicSamples, s.reg, s.logger, opts)
	if err != nil {
		if s.cfg.SpoolDir == "" {
			return nil, nil, usage.Errorf("--queue.max-bytes: %v", err)
		}
		return nil, nil, usage.Errorf("--spool.dir: %v", err)
	}
	return pub, func() {
		if err := w.Close(); err != nil && !errors.Is(err, context.Canceled) {
			s.logger.Warn("closing the Kafka writer", "err", err)
		}
		if err := pub.Close(); err != nil {
			s.logger.Warn("closing the spool", "err", err)
		}
	}, nil
}
