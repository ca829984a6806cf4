package main

import (
	"context"
	"log/slog"
	"os"
	"runtime"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/exporter/kubernetes"
	"github.com/slicemeter/slicemeter/exporter/service"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	"github.com/slicemeter/slicemeter/internal/usage"
	"github.com/slicemeter/slicemeter/internal/webserver"
)

// exporterCmd is the exporter's flags; the service does the rest.
type exporterCmd struct {
	cfg     service.Config
	brokers string
	// maxProcs is --runtime.gomaxprocs; maxProcsSet whether it was given (flag or its variable).
	maxProcs    int
	maxProcsSet bool
}

func newExporterCmd(app *kingpin.Application) *exporterCmd {
	c := app.Command("exporter", "Sample every GPU, MIG and vGPU instance of a node; serve /metrics and stream every sample to Kafka.")
	host, _ := os.Hostname()
	e := &exporterCmd{}
	cfg := &e.cfg
	c.Flag("source", "Where samples come from: nvml (this node's GPUs), sim (a scenario file) or replay (a capture file). Default: sim with --scenario, replay with --replay, else nvml.").
		PlaceHolder("nvml|sim|replay").StringVar(&cfg.Source)
	c.Flag("scenario", "Scenario file for --source sim.").StringVar(&cfg.ScenarioPath)
	c.Flag("sim.node", "Simulate only this node of the scenario (default: every node).").StringVar(&cfg.SimNode)
	c.Flag("sim.start", "Move the scenario to start at this time (RFC 3339, or now): samples then carry wall-clock timestamps, as Prometheus and the staleness alert expect.").StringVar(&cfg.SimStart)
	c.Flag("sim.fast", "Run the simulated clock as fast as possible instead of in real time.").BoolVar(&cfg.Fast)
	c.Flag("sim.allocations", "With --source sim and --kafka.brokers: publish the scenario's allocations on the allocations topic as a scheduler would, so that its tenants are billed (--no-sim.allocations: samples only; with --kubernetes the pods' allocations instead).").Default("true").BoolVar(&cfg.SimAllocations)
	c.Flag("node", "Node name in samples for --source nvml.").Default(host).StringVar(&cfg.Node)
	c.Flag("nvml.library", "Path of libnvidia-ml.so.1 (default: the dynamic loader's search, then the usual driver directories).").StringVar(&cfg.NVMLLibrary)
	c.Flag("interval", "Sampling interval for --source nvml.").Default("100ms").DurationVar(&cfg.Interval)
	c.Flag("duration", "Stop after sampling this long (--source nvml; 0: until stopped).").Default("0").DurationVar(&cfg.Duration)
	c.Flag("record", "Record what NVML returned into this capture file (--source nvml, or sim with one node).").StringVar(&cfg.Record)
	c.Flag("replay", "Capture file for --source replay.").StringVar(&cfg.Replay)
	c.Flag("replay.fast", "Replay as fast as possible instead of at the recorded timing.").BoolVar(&cfg.ReplayFast)
	c.Flag("summary", "Write a JSON summary of the run (per GPU and instance means) to this file at every flush.").StringVar(&cfg.Summary)
	c.Flag("kafka.brokers", "Kafka brokers (host:port,...); empty serves /metrics only.").StringVar(&e.brokers)
	kafkaSecurityFlags(c, &cfg.Kafka)
	c.Flag("kafka.flush-interval", "How much sampled time goes into one SampleBatch per node.").Default("1s").DurationVar(&cfg.FlushInterval)
	c.Flag("kafka.partitions", "Partitions of the samples topic when it has to be created.").Default("4").IntVar(&cfg.Partitions)
	c.Flag("spool.dir", "Directory of the disk spool that keeps batches while Kafka is unreachable, at start too (empty: a bounded memory queue, see --queue.max-bytes).").StringVar(&cfg.SpoolDir)
	c.Flag("spool.max-bytes", "Size limit of the spool; when full the oldest batches are dropped and counted.").Default("1073741824").Int64Var(&cfg.SpoolMaxBytes)
	c.Flag("queue.max-bytes", "Without --spool.dir: size limit of the memory queue that keeps batches while Kafka is unreachable; when full the oldest are dropped and counted (memory_queue_full), and what it holds at exit is lost.").Default("67108864").Int64Var(&cfg.QueueMaxBytes)
	c.Flag("kafka.max-message-bytes", "Largest message the samples topic accepts; bigger batches are split to fit (0: read the topic's max.message.bytes once Kafka is reached).").Default("0").Int64Var(&cfg.MaxMessageBytes)
	c.Flag("kafka.drain-timeout", "At exit, how long to keep delivering queued batches; what is left then stays in the spool (or is lost with the memory queue) and the exit status is 1.").Default("30s").DurationVar(&cfg.DrainTimeout)
	cfg.Web = webFlags(c, ":9835")
	cfg.Kubernetes = kubernetesFlags(c)
	c.Flag("runtime.gomaxprocs", "How many CPUs the Go runtime runs on at once (GOMAXPROCS); 0: Go's default (the CPUs or the container's CPU limit, at least 2). "+
		"One is enough for a node's exporter and keeps its footprint down; a GOMAXPROCS variable in the environment is kept unless this flag is given.").
		Default("1").IsSetByUser(&e.maxProcsSet).IntVar(&e.maxProcs)
	return e
}

func (e *exporterCmd) run(ctx context.Context, logger *slog.Logger) error {
	if err := e.setMaxProcs(os.Getenv("GOMAXPROCS")); err != nil {
		return err
	}
	cfg := e.cfg
	cfg.Brokers = kafkaconn.ParseBrokers(e.brokers)
	svc, err := service.New(cfg, webserver.NewRegistry(), logger)
	if err != nil {
		return err
	}
	defer func() {
		if err := svc.Close(); err != nil {
			logger.Warn("closing the source", "err", err)
		}
	}()
	_, err = svc.Run(ctx)
	return err
}

// setMaxProcs applies --runtime.gomaxprocs. The exporter's work is a tick of a few hundred
// microseconds every 100 ms and a scrape: on one P the runtime wakes no second thread to look
// for work at every tick, and keeps one P's caches and GC workers instead of one per CPU (on
// the 72-instance benchmark node: 7 MiB less anonymous memory and about 0.1 % of a core less,
// docs/benchmarks.md).
func (e *exporterCmd) setMaxProcs(env string) error {
	switch {
	case e.maxProcs < 0:
		return usage.Errorf("--runtime.gomaxprocs: %d is negative; want a number of CPUs, or 0 for Go's default", e.maxProcs)
	case !e.maxProcsSet && env != "": // the operator's GOMAXPROCS, read by the runtime at start
	case e.maxProcs > 0:
		runtime.GOMAXPROCS(e.maxProcs)
	}
	return nil
}

// kubernetesFlags registers --kubernetes and its flags on the exporter's command.
func kubernetesFlags(c *kingpin.CmdClause) *kubernetes.Flags {
	f := &kubernetes.Flags{}
	c.Flag("kubernetes", "Discover allocations from this node's pods (kubelet PodResources API and the API server) and publish them; label instance series with their pods.").BoolVar(&f.Enabled)
	c.Flag("kubernetes.pod-resources-socket", "The kubelet's PodResources v1 unix socket.").Default(kubernetes.DefaultSocket).StringVar(&f.Socket)
	c.Flag("kubernetes.kubeconfig", "Kubeconfig file of the API server (default: the in-cluster service account).").StringVar(&f.Kubeconfig)
	c.Flag("kubernetes.node-name", "This node's name in Kubernetes: its pods are watched and its allocations carry it (default: $NODE_NAME).").Default(os.Getenv("NODE_NAME")).StringVar(&f.NodeName)
	c.Flag("kubernetes.tenant-label", "Pod label holding the tenant (default: the pod's namespace is the tenant).").StringVar(&f.Labels.Tenant)
	c.Flag("kubernetes.tier-label", "Pod label holding the tier (default or absent: --kubernetes.default-tier).").StringVar(&f.Labels.Tier)
	c.Flag("kubernetes.default-tier", "Tier of pods without the tier label; name one of the price book's tiers.").Default("default").StringVar(&f.Labels.DefaultTier)
	c.Flag("kubernetes.proc-root", "Where the host's /proc is (the exporter needs hostPID): process cgroups map share replicas' processes to pods.").Default("/proc").StringVar(&f.ProcRoot)
	c.Flag("kubernetes.refresh-interval", "How often the kubelet's PodResources API is read (pods come from a watch, at once).").Default("10s").DurationVar(&f.Refresh)
	return f
}
