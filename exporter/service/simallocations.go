package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// simAllocationsRetry is how long the simulated scheduler waits before publishing again
// when Kafka refused or could not be reached.
const simAllocationsRetry = 5 * time.Second

// simAllocationMetrics counts what the simulated scheduler published and its failed tries.
type simAllocationMetrics struct {
	published prometheus.Counter
	errors    prometheus.Counter
}

func newSimAllocationMetrics(reg prometheus.Registerer) *simAllocationMetrics {
	m := &simAllocationMetrics{
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slicemeter_exporter_sim_allocations_published_total",
			Help: "Allocation events of the simulated scenario published on the allocations topic, as a scheduler would (--sim.allocations).",
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slicemeter_exporter_sim_allocations_publish_errors_total",
			Help: "Failed tries to publish the simulated scenario's allocation events; each is retried.",
		}),
	}
	reg.MustRegister(m.published, m.errors)
	return m
}

// simRepetition is the allocation events of one repetition of a scenario: the scenario's
// own for repetition 0, shifted by k durations for repetition k of a looping scenario (its ids
// suffixed with "/loop<k>", so that each repetition is an allocation of its own). With node
// set, only that node's allocations: an exporter simulating one node announces its own.
func simRepetition(sc *scenario.Scenario, node string, k int) []*pb.AllocationEvent {
	shift := int64(k) * sc.Duration.Nanoseconds()
	var out []*pb.AllocationEvent
	for _, e := range sc.AllocationEvents() {
		if node != "" && e.Node != node {
			continue
		}
		if k > 0 {
			e.AllocationId = fmt.Sprintf("%s/loop%d", e.AllocationId, k)
			e.RequestedAtNs += shift
			e.StartedAtNs += shift
			e.EndedAtNs += shift
		}
		out = append(out, e)
	}
	return out
}

// messageWriter is what publishing needs of a Kafka writer.
type messageWriter interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// simScheduler publishes a simulated scenario's allocations on the allocations topic, as the
// fleet's scheduler would: each repetition's events when the simulated clock reaches it (the
// first at once), retried until Kafka takes them. Without it a standalone simulated exporter
// fills the samples table while every cost goes to __unallocated__.
type simScheduler struct {
	sc      *scenario.Scenario
	node    string
	w       messageWriter
	clock   exporter.Clock // the source's: a later repetition starts when it reaches it
	retry   time.Duration  // between tries while Kafka does not take them
	metrics *simAllocationMetrics
	logger  *slog.Logger
}

// run publishes repetition 0 and, for a looping scenario, every later one as its window
// starts, until ctx ends.
func (p *simScheduler) run(ctx context.Context) {
	for k := 0; ; k++ {
		if k > 0 {
			if !p.sc.Loop {
				return
			}
			if p.clock.WaitUntil(ctx, p.sc.Start.Add(time.Duration(k)*p.sc.Duration)) != nil {
				return
			}
		}
		if !p.publish(ctx, simRepetition(p.sc, p.node, k)) {
			return
		}
	}
}

// publish writes events, retrying every p.retry; false when ctx ended first.
func (p *simScheduler) publish(ctx context.Context, events []*pb.AllocationEvent) bool {
	if len(events) == 0 {
		return true
	}
	msgs := make([]kafka.Message, 0, len(events))
	for _, e := range events {
		v, err := proto.Marshal(e)
		if err != nil { // a scenario's events always encode; say so if one does not
			p.logger.Error("encoding a simulated allocation", "allocation", e.AllocationId, "err", err)
			return true
		}
		msgs = append(msgs, kafka.Message{Key: []byte(e.Tenant), Value: v})
	}
	logged := false
	for {
		err := p.w.WriteMessages(ctx, msgs...)
		if err == nil {
			p.metrics.published.Add(float64(len(msgs)))
			p.logger.Info("published the simulated scenario's allocations, as a scheduler would",
				"topic", pb.TopicAllocations, "allocations", len(msgs), "scenario", p.sc.Name)
			return true
		}
		if ctx.Err() != nil {
			p.logger.Warn("stopped before the simulated allocations were published", "allocations", len(msgs))
			return false
		}
		p.metrics.errors.Inc()
		if !logged { // once per batch: the retries would repeat it every few seconds
			p.logger.Warn("publishing the simulated allocations failed; retrying", "topic", pb.TopicAllocations,
				"allocations", len(msgs), "every", p.retry, "err", err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(p.retry):
		}
	}
}

// startSimScheduler starts the simulated scheduler of a "sim" source with --sim.allocations
// and brokers; the returned function stops it and closes its writer.
func (s *Service) startSimScheduler(ctx context.Context) func() {
	// With --kubernetes the pods are the scheduler: their allocations are the ones published.
	if s.cfg.Source != "sim" || !s.cfg.SimAllocations || len(s.kafka.Brokers) == 0 || s.src.scenario == nil || s.kube != nil {
		return func() {}
	}
	w := s.kafka.NewWriter("", s.logger)
	tw := &topicsWriter{w: w, ensure: func(ctx context.Context) error {
		return s.kafka.EnsureTopics(ctx, s.cfg.Partitions, pb.TopicAllocations, pb.TopicDeadLetter)
	}}
	p := &simScheduler{sc: s.src.scenario, node: s.cfg.SimNode, w: topicWriter{tw}, clock: s.src.clock,
		retry: simAllocationsRetry, metrics: s.simAllocMetrics, logger: s.logger}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.run(ctx) }()
	return func() {
		cancel()
		<-done
		if err := w.Close(); err != nil && !errors.Is(err, context.Canceled) {
			s.logger.Warn("closing the simulated allocations' Kafka writer", "err", err)
		}
	}
}

// topicWriter addresses every message to the allocations topic (the writer has no topic of
// its own, as the Kubernetes discovery's).
type topicWriter struct{ w messageWriter }

func (t topicWriter) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	for i := range msgs {
		msgs[i].Topic = pb.TopicAllocations
	}
	return t.w.WriteMessages(ctx, msgs...)
}
