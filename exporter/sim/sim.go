// Package sim is the simulated source: each node of a scenario gets a simulated NVML
// (go-nvml's nvml.Interface, its mock types wired to the scenario model) read by the same
// nvmlsource translation code as real GPUs. The scenario is the ground truth; the attribution
// must recover it from these samples alone.
package sim

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/exporter/nvmlsource"
	"github.com/slicemeter/slicemeter/schemas/scenario"
)

// Source simulates every node of a scenario (or one of them).
type Source struct {
	sc    *scenario.Scenario
	nodes []*node
	opts  Options
}

// Options are the simulator's optional parts; the zero value has none of them.
type Options struct {
	Metrics *nvmlsource.Metrics // the nvml sources' self-metrics (nil: unregistered)
	Logger  *slog.Logger
	// Recorder, if set, records the simulated NVML (one node, no outages: a capture is one
	// exporter process).
	Recorder Recorder
	// Rediscover is the nvml sources' rediscovery period (0: never; simulated layouts are fixed).
	Rediscover time.Duration
}

// Recorder is what the simulator needs of capture.Recorder.
type Recorder interface {
	Library(nvml.Interface) nvml.Interface
	BeginTick(time.Time) error
}

var _ exporter.Source = (*Source)(nil)

// New builds the simulated fleet. nodeName selects one node; empty means all of them.
func New(sc *scenario.Scenario, nodeName string, opts Options) (*Source, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Rediscover <= 0 {
		opts.Rediscover = time.Duration(math.MaxInt64)
	}
	s := &Source{sc: sc, opts: opts}
	for _, n := range sc.Nodes {
		if nodeName != "" && n.Name != nodeName {
			continue
		}
		nd, err := newNode(sc, n)
		if err != nil {
			return nil, err
		}
		nd.world = newWorld(nd, sc.Start, sc.Interval)
		s.nodes = append(s.nodes, nd)
	}
	if len(s.nodes) == 0 {
		return nil, fmt.Errorf("scenario %s has no node named %q", sc.Path, nodeName)
	}
	if opts.Recorder != nil && (len(s.nodes) != 1 || len(s.nodes[0].outages) != 0) {
		return nil, fmt.Errorf("scenario %s: recording needs one node without outages (choose one with --sim.node)", sc.Path)
	}
	for _, t := range sc.Tenants {
		for _, a := range t.Allocations {
			if inst := s.find(a.Target); inst != nil {
				inst.allocations = append(inst.allocations, a)
			}
		}
	}
	return s, nil
}

// Nodes lists the simulated node names.
func (s *Source) Nodes() []string {
	names := make([]string, len(s.nodes))
	for i, n := range s.nodes {
		names[i] = n.name
	}
	return names
}

// Instances counts the simulated instances (the samples of one tick without outages).
func (s *Source) Instances() int {
	n := 0
	for _, nd := range s.nodes {
		for _, g := range nd.gpus {
			n += len(g.instances)
		}
	}
	return n
}

// Read samples every instance of every node at tick t; a node in an outage yields nothing.
// Ticks must be read in increasing order: the simulated GPUs carry state between ticks. Each
// node's simulated NVML stands at the end of the tick when its nvml source reads it, so the
// source's window [t, t+interval) is the tick.
func (s *Source) Read(ctx context.Context, t time.Time, interval time.Duration) ([]exporter.NodeSamples, error) {
	if interval != s.sc.Interval {
		return nil, fmt.Errorf("scenario %s: sampled every %s, not every %s", s.sc.Path, s.sc.Interval, interval)
	}
	d := t.Sub(s.sc.Start)
	out := make([]exporter.NodeSamples, 0, len(s.nodes))
	for _, n := range s.nodes {
		if n.down(d) {
			// The exporter is down: the GPUs keep running, nobody reads them, and the exporter
			// that comes back is a new process.
			if n.src != nil {
				_ = n.src.Close()
				n.src = nil
			}
			if n.world.d != d {
				n.world.advance(d)
			}
			n.world.write(-1)
			continue
		}
		if err := s.open(n, t); err != nil {
			return nil, err
		}
		if n.world.d != d { // not yet advanced by a poll
			n.world.advance(d)
		}
		n.world.write(-1)
		ns, err := n.src.Read(ctx, t.Add(interval), interval)
		if err != nil {
			return nil, fmt.Errorf("reading the simulated NVML of node %s: %w", n.name, err)
		}
		out = append(out, ns...)
	}
	return out, nil
}

// open starts the node's nvml source if it has none, while the world still stands at t, the end
// of the previous tick.
func (s *Source) open(n *node, t time.Time) error {
	if n.src != nil {
		return nil
	}
	var lib nvml.Interface = n.world.lib
	ids := nvmlsource.Indices
	if s.sc.UUIDs {
		ids = nvmlsource.UUIDs
	}
	cfg := nvmlsource.Config{Node: n.name, IDs: ids, Metrics: s.opts.Metrics, Logger: s.opts.Logger,
		Rediscover: s.opts.Rediscover, Shares: shares{n, s.sc.UUIDs}}
	if r := s.opts.Recorder; r != nil {
		lib, cfg.BeforeRead = r.Library(lib), r.BeginTick
	}
	src, err := nvmlsource.Open(lib, cfg, t)
	if err != nil {
		return fmt.Errorf("opening the simulated NVML of node %s: %w", n.name, err)
	}
	n.src = src
	return nil
}

var _ exporter.Poller = (*Source)(nil)

// PollEvery is how often the nodes' vGPU scheduler logs must be read (exporter.Poller); a node
// whose source has not started yet is read as often as an unknown time slice needs.
func (s *Source) PollEvery() time.Duration {
	var every time.Duration
	for _, n := range s.nodes {
		var e time.Duration
		switch {
		case n.src != nil:
			e = n.src.PollEvery()
		case n.hasVGPUs():
			e = nvmlsource.SchedPollEvery(0)
		}
		if e > 0 && (every == 0 || e < every) {
			every = e
		}
	}
	return every
}

// Poll reads the nodes' vGPU scheduler logs at loop time at, between the ticks (exporter.Poller).
// Read(t) reads the world's tick [t, t+interval) at its end, so the simulated time of a poll is
// at + interval: the world advances to the tick that holds it, and the log holds the entries
// of the runs that ended by then.
func (s *Source) Poll(ctx context.Context, at time.Time, interval time.Duration) error {
	now := at.Add(interval).Sub(s.sc.Start)
	d := now / interval * interval
	for _, n := range s.nodes {
		if n.down(d) || !n.hasVGPUs() {
			continue
		}
		if err := s.open(n, s.sc.Start.Add(d)); err != nil {
			return err
		}
		if n.world.d != d {
			n.world.advance(d)
		}
		n.world.write(now)
		if err := n.src.Poll(ctx, at, interval); err != nil {
			return fmt.Errorf("polling the simulated NVML of node %s: %w", n.name, err)
		}
	}
	return nil
}

// NVMLCalls counts the NVML calls made by the nodes' nvml sources since they last started.
func (s *Source) NVMLCalls() int64 {
	var n int64
	for _, nd := range s.nodes {
		if nd.src != nil {
			n += nd.src.Calls()
		}
	}
	return n
}
