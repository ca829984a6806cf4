package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/segmentio/kafka-go"
	"k8s.io/klog/v2"

	"github.com/slicemeter/slicemeter/exporter/kubernetes"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// openKubernetes starts nothing yet: it checks the --kubernetes flags and prepares the
// discovery (API server client, kubelet socket client, the allocations' Kafka writer). The
// state file goes into --spool.dir, so that a restart republishes nothing.
func (s *Service) openKubernetes() (*kubernetes.Discovery, func(), error) {
	f := s.cfg.Kubernetes
	if f == nil || !f.Enabled {
		return nil, func() {}, nil
	}
	if err := f.Check(); err != nil {
		return nil, nil, err
	}
	client, err := f.Client()
	if err != nil {
		return nil, nil, err
	}
	kub, err := kubernetes.DialPodResources(f.Socket)
	if err != nil {
		return nil, nil, fmt.Errorf("--kubernetes.pod-resources-socket: %w", err)
	}
	// client-go logs every retry of an unreachable API server through klog, process-wide; the
	// discovery reports those failures itself, once a minute (exporter/README.md, "Allocations from pods").
	klog.SetSlogLogger(slog.New(slog.DiscardHandler))
	f.StateDir = s.cfg.SpoolDir
	cfg := kubernetes.Config{Flags: f, Client: client, Kubelet: kub, Registry: s.reg, Logger: s.logger}
	var w *kafka.Writer
	if len(s.kafka.Brokers) > 0 {
		w = s.kafka.NewWriter("", s.logger)
		cfg.Writer = &topicsWriter{w: w, ensure: func(ctx context.Context) error {
			return s.kafka.EnsureTopics(ctx, s.cfg.Partitions, pb.TopicAllocations, pb.TopicDeadLetter)
		}}
	}
	d, err := kubernetes.New(cfg)
	if err != nil {
		_ = kub.Close()
		return nil, nil, err
	}
	return d, func() {
		if w != nil {
			if err := w.Close(); err != nil && !errors.Is(err, context.Canceled) {
				s.logger.Warn("closing the allocations' Kafka writer", "err", err)
			}
		}
		if err := kub.Close(); err != nil {
			s.logger.Warn("closing the kubelet pod-resources connection", "err", err)
		}
	}, nil
}

// topicsWriter makes sure the allocations and dead-letter topics exist before its first
// write succeeds (the writer does not create topics).
type topicsWriter struct {
	w      *kafka.Writer
	ensure func(context.Context) error
	mu     sync.Mutex
	done   bool
}

func (t *topicsWriter) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.done {
		if err := t.ensure(ctx); err != nil {
			return err
		}
		t.done = true
	}
	return t.w.WriteMessages(ctx, msgs...)
}
