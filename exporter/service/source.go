package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/exporter/capture"
	"github.com/slicemeter/slicemeter/exporter/nvmlsource"
	"github.com/slicemeter/slicemeter/exporter/replay"
	"github.com/slicemeter/slicemeter/exporter/sim"
	"github.com/slicemeter/slicemeter/internal/usage"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	"github.com/slicemeter/slicemeter/schemas/validate"
)

// source is an opened source with the loop settings it implies.
type source struct {
	exporter.Source
	start     time.Time
	end       time.Time // zero: until ctx ends
	interval  time.Duration
	clock     exporter.Clock
	close     func() error
	describe  []any                 // what the start of sampling logs
	poll      func(context.Context) // background work of the source (vGPU scheduler logs)
	instances int                   // sampled per tick, where the source knows before sampling
	scenario  *scenario.Scenario    // a "sim" source's scenario, moved to its start (nil for the others)
}

func noClose() error { return nil }

// openSource opens the source cfg names. m and logger are the nvml source's; shares (nil:
// none) says which GPUs real NVML samples as share instances. A simulated fleet has its own,
// from the scenario.
func openSource(cfg *Config, shares exporter.Shares, m *nvmlsource.Metrics, logger *slog.Logger) (*source, error) {
	var err error
	if cfg.Source, err = SourceOf(*cfg); err != nil {
		return nil, err
	}
	switch cfg.Source {
	case "nvml":
		return openNVML(cfg, shares, m, logger)
	case "sim":
		return openSim(cfg, m, logger)
	case "replay":
		return openReplay(cfg, m, logger)
	default:
		return nil, usage.Errorf("--source %q: expected nvml, sim or replay", cfg.Source)
	}
}

// SourceOf is the source cfg samples: the one it names, else the one its files imply (a
// scenario: sim; a capture: replay), else this node's GPUs. A bare exporter on a GPU node is a
// production exporter; a file that names what to simulate or replay is never taken for NVML.
func SourceOf(cfg Config) (string, error) {
	sim, replay := cfg.ScenarioPath != "" || cfg.Scenario != nil, cfg.Replay != ""
	switch {
	case cfg.Source != "":
		return cfg.Source, nil
	case sim && replay:
		return "", usage.Errorf("--scenario and --replay without --source: expected --source sim or --source replay to say which")
	case sim:
		return "sim", nil
	case replay:
		return "replay", nil
	default:
		return "nvml", nil
	}
}

// clockFor is the clock of a source whose tick times are its own (a scenario's, a capture's):
// real time from now on, or as fast as the pipeline accepts ticks.
func clockFor(start time.Time, fast bool) exporter.Clock {
	if fast {
		return exporter.FastClock{}
	}
	return exporter.RealClock{Offset: time.Since(start)}
}

func openNVML(cfg *Config, shares exporter.Shares, m *nvmlsource.Metrics, logger *slog.Logger) (*source, error) {
	interval := cfg.Interval
	if interval <= 0 {
		return nil, usage.Errorf("--interval %s: expected > 0", interval)
	}
	lib := nvmlsource.Library(cfg.NVMLLibrary)
	ncfg := nvmlsource.Config{Node: cfg.Node, IDs: nvmlsource.UUIDs, Metrics: m, Logger: logger, Rediscover: 10 * time.Second,
		Shares: shares}
	closeRec := noClose
	if cfg.Record != "" {
		rec, err := newRecorder(cfg.Record, cfg.Node, interval, "nvml", ncfg.Rediscover)
		if err != nil {
			return nil, err
		}
		lib, ncfg.BeforeRead, closeRec = rec.Library(lib), rec.BeginTick, rec.Close
	}
	// Ticks on the interval grid; the source is opened one interval before the first, which
	// is its first window (GPM needs a sample before it).
	start := time.Now().Truncate(interval).Add(2 * interval)
	src, err := nvmlsource.Open(lib, ncfg, start.Add(-interval))
	if err != nil {
		_ = closeRec()
		return nil, fmt.Errorf("--source nvml: %w", err)
	}
	var end time.Time
	if cfg.Duration > 0 {
		end = start.Add(cfg.Duration)
	}
	s := &source{Source: src, start: start, end: end, interval: interval, clock: exporter.RealClock{},
		close:    func() error { return errors.Join(src.Close(), closeRec()) },
		describe: []any{"source", "nvml", "node", cfg.Node, "record", cfg.Record}}
	// The driver's vGPU scheduler log holds 200 entries: the loop reads it between ticks on
	// the ticks' clock (exporter.Poller, PollBefore).
	return s, nil
}

func openSim(cfg *Config, m *nvmlsource.Metrics, logger *slog.Logger) (*source, error) {
	sc := cfg.Scenario
	if sc == nil {
		var err error
		if sc, err = LoadScenario(cfg.ScenarioPath); err != nil {
			return nil, err
		}
	}
	if cfg.SimStart != "" || cfg.Fast {
		moved := *sc // the caller's scenario stays as it was
		if err := MoveScenario(&moved, cfg.SimStart, cfg.Fast, "--sim.fast"); err != nil {
			return nil, err
		}
		sc = &moved
	}
	opts := sim.Options{Metrics: m, Logger: logger}
	closeRec := noClose
	if cfg.Record != "" {
		node := cfg.SimNode
		if node == "" && len(sc.Nodes) == 1 {
			node = sc.Nodes[0].Name
		}
		rec, err := newRecorder(cfg.Record, node, sc.Interval, "sim", 0)
		if err != nil {
			return nil, err
		}
		opts.Recorder, closeRec = rec, rec.Close
	}
	src, err := sim.New(sc, cfg.SimNode, opts)
	if err != nil {
		_ = closeRec()
		return nil, usage.Wrap(err)
	}
	end := sc.End()
	if sc.Loop {
		end = time.Time{} // until stopped
	}
	return &source{Source: src, start: sc.Start, end: end, interval: sc.Interval, clock: clockFor(sc.Start, cfg.Fast),
		close: closeRec, instances: src.Instances(), scenario: sc,
		describe: []any{"source", "sim", "scenario", sc.Name, "nodes", src.Nodes(), "instances", src.Instances(), "fast", cfg.Fast,
			"start", sc.Start, "loop", sc.Loop}}, nil
}

func openReplay(cfg *Config, m *nvmlsource.Metrics, logger *slog.Logger) (*source, error) {
	if cfg.Replay == "" {
		return nil, usage.Errorf("--replay FILE is required with --source replay")
	}
	if cfg.Record != "" {
		return nil, usage.Errorf("--record: a replay cannot be recorded again")
	}
	p, err := replay.Load(cfg.Replay)
	if err != nil {
		return nil, usage.Wrap(err)
	}
	if err := p.Open(m, logger); err != nil {
		return nil, usage.Wrap(err)
	}
	return &source{Source: p, start: p.Start(), end: p.End(), interval: p.Interval(), clock: clockFor(p.Start(), cfg.ReplayFast),
		close:    p.Close,
		describe: []any{"source", "replay", "capture", cfg.Replay, "node", p.Header.Node, "ticks", p.Ticks()}}, nil
}

// newRecorder starts a capture file; rediscover 0 is the simulator's (it never rediscovers).
func newRecorder(path, node string, interval time.Duration, source string, rediscover time.Duration) (*capture.Recorder, error) {
	if rediscover == 0 {
		rediscover = time.Duration(1<<63 - 1)
	}
	w, err := capture.Create(path, capture.Header{Node: node, IntervalNs: int64(interval), Source: source, RediscoverNs: int64(rediscover)})
	if err != nil {
		return nil, usage.Errorf("--record %s: %v", path, err)
	}
	return capture.NewRecorder(w, interval), nil
}

// LoadScenario loads the scenario of a sim source; every problem with it is a usage error.
func LoadScenario(path string) (*scenario.Scenario, error) {
	if path == "" {
		return nil, usage.Errorf("--scenario is required with --source sim")
	}
	sc, err := scenario.Load(path)
	if err != nil {
		return nil, usage.Wrap(err)
	}
	return sc, nil
}

// MoveScenario moves sc to start at simStart ("now", an RFC 3339 time; empty: as written), and
// refuses, as a usage error, a fast run (fastFlag names its flag) that would stamp samples
// further ahead of the wall clock than the collector accepts: one ending more than
// validate.MaxAhead from now, or one that loops.
func MoveScenario(sc *scenario.Scenario, simStart string, fast bool, fastFlag string) error {
	if simStart != "" {
		start := time.Now().UTC().Truncate(time.Second)
		if simStart != "now" {
			var err error
			if start, err = time.Parse(time.RFC3339Nano, simStart); err != nil {
				return usage.Errorf("--sim.start %q: expected now or an RFC 3339 time such as 2026-01-05T00:00:00Z", simStart)
			}
		}
		// Checked on the parsed time, start and end, before the simulator stamps nanoseconds
		// (which wrap after 2262 into times the collector would accept).
		for _, at := range []time.Time{start, start.Add(sc.Duration)} {
			if r := validate.CheckTime("--sim.start", strconv.Quote(simStart), at); r != nil {
				return usage.Errorf("--sim.start %q: the scenario would run to %s; expected %s", simStart, at.UTC().Format(time.RFC3339Nano), r.Expected)
			}
		}
		sc.Start = start.UTC()
	}
	if !fast {
		return nil
	}
	if sc.Loop {
		return usage.Errorf("%s with scenario %s: it loops (loop: true), so a fast clock would run ahead of the wall clock without end; "+
			"drop %s to run it in real time", fastFlag, sc.Path, fastFlag)
	}
	if ahead := time.Until(sc.End()); ahead > validate.MaxAhead {
		return usage.Errorf("%s with --sim.start %q: the scenario would end %s ahead of now, and samples more than %s ahead are refused; "+
			"start it at least %s ago, or drop %s to run it in real time", fastFlag, simStart, ahead.Round(time.Second), validate.MaxAhead, sc.Duration, fastFlag)
	}
	return nil
}
