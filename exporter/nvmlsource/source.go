// Package nvmlsource is the exporter's NVML source: it reads every physical GPU, MIG instance
// and vGPU instance of a node through go-nvml's nvml.Interface and translates what NVML returns
// into samples. The simulator drives this same code through a simulated nvml.Interface.
package nvmlsource

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/internal/lograte"
)

// IDScheme says how instance ids are formed.
type IDScheme int

const (
	// UUIDs: the GPU UUID, MIG UUID or vGPU instance UUID (real hardware; schemas/README.md, "Instances").
	UUIDs IDScheme = iota
	// Indices: gpuN, gpuN/migM, gpuN/vgpuM in index order (the simulator).
	Indices
)

// Bounds on what NVML may report (a replayed capture may be corrupt): more is not a real node.
const (
	maxGPUs       = 1024
	maxMIGDevices = 64
)

// Config configures a Source.
type Config struct {
	Node    string
	IDs     IDScheme
	Logger  *slog.Logger
	Metrics *Metrics // nil: counted but not registered
	// Rediscover is how often (in tick time) MIG layouts and active vGPUs are listed again.
	Rediscover time.Duration
	// BeforeRead, if set, is called at the start of every Read (a capture cuts its frames there).
	BeforeRead func(t time.Time) error
	// Shares, if set, says which GPUs are handed out as time-sliced or MPS replicas and which
	// process runs on which: such a GPU (not MIG, not a vGPU host) is sampled as one share
	// instance per replica instead of as a whole GPU. Called every tick: it must not block.
	Shares exporter.Shares
}

// ErrLibraryNotFound is returned by Open when libnvidia-ml.so.1 cannot be loaded.
var ErrLibraryNotFound = errors.New("the NVML library libnvidia-ml.so.1 was not found (no NVIDIA driver on this machine?); use --source sim --scenario FILE to run without a GPU")

// Source samples one node through NVML. Read takes the window [t−interval, t): what the
// driver buffered since the previous tick.
type Source struct {
	lib      nvml.Interface
	cfg      Config
	m        *Metrics
	logger   *slog.Logger
	lostLogs *lograte.Limiter // wrapped vGPU scheduler logs: once per sampling interval
	logs     *lograte.Limiter // what may repeat every tick (XIDs): once a minute per kind

	mu           sync.Mutex // Read and Poll
	gpus         []*gpuDev
	events       nvml.EventSet
	lastDiscover time.Time
	calls        int64 // NVML calls made, for calls-per-tick figures
	samplesSeen  int   // samples the last Read returned: the next one's capacity

	driverVersion, cudaVersion string // read once at Open
}

var _ exporter.Source = (*Source)(nil)

// instanceKey names an instance of a GPU by kind ("mig", "vgpu"; "" the GPU itself) and index.
type instanceKey struct {
	kind  string
	index int
}

type gpuDev struct {
	index    int
	dev      nvml.Device
	uuid     string
	model    string
	sms      uint32
	memTotal uint64
	pciBusID string // read once in describeGPU: a GPU does not move on the bus while NVML is open

	gpmMu   sync.Mutex // GPM calls are serialized per device (NVML's GPM is not re-entrant per GPU)
	gpm     bool       // GPM supported (Hopper or newer)
	gpmMIG  bool       // nvmlGpmMigSampleGet present
	devGPM  *gpmTarget
	schedOK bool          // nvmlDeviceGetVgpuSchedulerLog_v2 present
	slice   time.Duration // the vGPU scheduler's time slice, from its log (0: not read yet)

	unsupported   map[string]bool        // calls that returned NOT_SUPPORTED are not made again
	ids           map[instanceKey]string // instance ids by index (IDs Indices): formatted once, not every tick
	fields        *fieldState            // the health field values asked every tick
	memV2         bool                   // nvmlDeviceGetMemoryInfo_v2 present (FB free and reserved)
	lastUtilTS    uint64
	lastVgpuTS    uint64
	lastProcTS    uint64 // the latest per-process utilization sample read (share instances)
	instancesSeen int    // instances the last tick read: the next one's capacity
	lost          string // the call that found the GPU lost in the current tick
	xids          uint64
	lastXID       uint64
	// The total energy counter (mJ) read at this tick (0: not read), and the reading of the
	// previous tick with its time: a sample carries both, so that its tick's energy is the
	// counter's increase without any state downstream (schemas/energy).
	energyNow    uint64
	energyPrev   uint64
	energyPrevAt time.Time

	mig   bool
	migs  []*migDev
	vgpus []*vgpuDev
	sched *schedLog
}

// Open initializes NVML and discovers the node's GPUs. now is the time of the first GPM
// samples (the first tick's window starts there).
func Open(lib nvml.Interface, cfg Config, now time.Time) (*Source, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Rediscover <= 0 {
		cfg.Rediscover = 10 * time.Second
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	// Every line of the source is about a GPU of this node: it names the node, so that the
	// lines of a fleet's exporters, gathered in one place, say which machine they are about.
	logger := cfg.Logger.With("node", cfg.Node)
	s := &Source{lib: lib, cfg: cfg, m: cfg.Metrics, logger: logger, logs: lograte.New(logger, time.Minute)}
	if r := lib.Init(); r == nvml.ERROR_LIBRARY_NOT_FOUND {
		return nil, ErrLibraryNotFound
	} else if r != nvml.SUCCESS {
		return nil, fmt.Errorf("initializing NVML: %s", nvml.ErrorString(r))
	}
	n, r := lib.DeviceGetCount()
	s.count("nvmlDeviceGetCount")
	if r != nvml.SUCCESS {
		_ = lib.Shutdown()
		return nil, fmt.Errorf("counting GPUs through NVML: %s", nvml.ErrorString(r))
	}
	if n < 0 || n > maxGPUs {
		_ = lib.Shutdown()
		return nil, fmt.Errorf("NVML reports %d GPUs; expected 0 to %d", n, maxGPUs)
	}
	s.openEvents()
	s.readVersions()
	for i := 0; i < n; i++ {
		g := &gpuDev{index: i, unsupported: map[string]bool{}, ids: map[instanceKey]string{}, sched: newSchedLog(), fields: newFieldState()}
		s.gpus = append(s.gpus, g)
		dev, r := lib.DeviceGetHandleByIndex(i)
		if !s.ok(g, "nvmlDeviceGetHandleByIndex", r) {
			g.lost = "nvmlDeviceGetHandleByIndex: " + nvml.ErrorString(r)
			s.logger.Warn("a GPU cannot be opened; the others are sampled", "gpu", i, "err", g.lost)
			continue
		}
		g.dev = dev
		s.describeGPU(g)
	}
	s.discover(now)
	for _, g := range s.gpus {
		s.primeGPM(g, now)
	}
	return s, nil
}

// has says whether the loaded NVML exports a symbol: calling a missing one kills the process.
func (s *Source) has(symbol string) bool {
	return s.lib.Extensions().LookupSymbol(symbol) == nil
}

// Close shuts NVML down.
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.gpus {
		g.devGPM.free()
		for _, m := range g.migs {
			m.gpm.free()
		}
	}
	if s.events != nil {
		_ = s.events.Free()
	}
	if r := s.lib.Shutdown(); r != nvml.SUCCESS {
		return fmt.Errorf("shutting NVML down: %s", nvml.ErrorString(r))
	}
	return nil
}

// Calls is the number of NVML calls made so far (benchmarks divide it by ticks).
func (s *Source) Calls() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func (s *Source) count(call string) {
	s.calls++
	s.m.called(call)
}

// ok counts a call and says whether it succeeded. NOT_SUPPORTED turns the call off for that GPU;
// any other failure is counted by call; a lost GPU is remembered for the tick.
func (s *Source) ok(g *gpuDev, call string, r nvml.Return) bool {
	s.count(call)
	switch r {
	case nvml.SUCCESS:
		return true
	case nvml.ERROR_NOT_SUPPORTED:
		if g != nil && !g.unsupported[call] {
			g.unsupported[call] = true
			s.logger.Info("NVML call not supported on this GPU; not called again", "gpu", g.index, "call", call)
		}
		return false
	}
	s.m.errors.WithLabelValues(call).Inc()
	if g != nil && (r == nvml.ERROR_GPU_IS_LOST || r == nvml.ERROR_RESET_REQUIRED || r == nvml.ERROR_UNINITIALIZED) && g.lost == "" {
		g.lost = call + ": " + nvml.ErrorString(r)
	}
	return false
}

func (g *gpuDev) can(call string) bool { return !g.unsupported[call] }
