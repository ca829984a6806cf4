package service

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/trace"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/exporter/promcollector"
	"github.com/slicemeter/slicemeter/exporter/publish"
	"github.com/slicemeter/slicemeter/exporter/summary"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	"github.com/slicemeter/slicemeter/internal/usage"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// openSinks returns the Prometheus collector, the Kafka publisher with brokers, and the summary
// if one is asked for. The publisher is always there to Run and Drain: without brokers it is one
// with nothing to send. closeSinks closes the Kafka writer and the spool.
func (s *Service) openSinks(ctx context.Context, tp trace.TracerProvider) (sinks []exporter.Sink, pub *publish.Publisher, closeSinks func(), err error) {
	col := promcollector.New()
	s.reg.MustRegister(col)
	sinks = []exporter.Sink{col}
	pub, closeSinks = publish.New(nil, pb.TopicSamples, nil, s.logger), func() {} // Run and Drain return at once
	if brokers := s.cfg.Brokers; len(brokers) > 0 {
		if pub, closeSinks, err = s.openPublisher(ctx, tp); err != nil {
			return nil, nil, nil, err
		}
		sinks = append(sinks, pub)
	}
	if s.cfg.Summary != "" {
		sinks = append(sinks, summary.New(s.cfg.Summary))
	}
	return sinks, pub, closeSinks, nil
}

// openPublisher opens the spool, makes sure the samples topic exists and returns the publisher.
func (s *Service) openPublisher(ctx context.Context, tp trace.TracerProvider) (*publish.Publisher, func(), error) {
	w := kafkaconn.NewWriter(s.cfg.Brokers, "", s.logger)
	// A flush is one message per node, already a batch: send it at once rather than waiting
	// BatchTimeout for more messages that will not come.
	w.BatchSize = 1
	// The spool first: a bad spool setting is the user's to fix, whatever Kafka's state.
	pub, err := publish.Open(w, pb.TopicSamples, s.reg, s.logger,
		publish.Options{SpoolDir: s.cfg.SpoolDir, SpoolMaxBytes: s.cfg.SpoolMaxBytes, Tracer: tp})
	if err != nil {
		return nil, nil, usage.Errorf("--spool.dir: %v", err)
	}
	if err := kafkaconn.EnsureTopics(ctx, s.cfg.Brokers, s.cfg.Partitions, pb.TopicSamples); err != nil {
		_ = pub.Close()
		return nil, nil, err
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
