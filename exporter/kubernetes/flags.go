package kubernetes

import (
	"os"
	"time"

	"github.com/alecthomas/kingpin/v2"
	k8sclient "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/slicemeter/slicemeter/internal/usage"
)

// DefaultSocket is where the kubelet serves its PodResources API.
const DefaultSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// Flags are the exporter's --kubernetes.* flags.
type Flags struct {
	Enabled    bool
	Socket     string
	Kubeconfig string // empty: in-cluster
	NodeName   string
	Labels     Labels
	ProcRoot   string
	Refresh    time.Duration
	StateDir   string // where the state file goes; the service sets it to --spool.dir
}

// AddFlags registers --kubernetes and its flags on the exporter's command.
func AddFlags(c *kingpin.CmdClause) *Flags {
	f := &Flags{}
	c.Flag("kubernetes", "Discover allocations from this node's pods (kubelet PodResources API and the API server) and publish them; label instance series with their pods.").BoolVar(&f.Enabled)
	c.Flag("kubernetes.pod-resources-socket", "The kubelet's PodResources v1 unix socket.").Default(DefaultSocket).StringVar(&f.Socket)
	c.Flag("kubernetes.kubeconfig", "Kubeconfig file of the API server (default: the in-cluster service account).").StringVar(&f.Kubeconfig)
	c.Flag("kubernetes.node-name", "This node's name in Kubernetes: its pods are watched and its allocations carry it (default: $NODE_NAME).").Default(os.Getenv("NODE_NAME")).StringVar(&f.NodeName)
	c.Flag("kubernetes.tenant-label", "Pod label holding the tenant (default: the pod's namespace is the tenant).").StringVar(&f.Labels.Tenant)
	c.Flag("kubernetes.tier-label", "Pod label holding the tier (default or absent: --kubernetes.default-tier).").StringVar(&f.Labels.Tier)
	c.Flag("kubernetes.default-tier", "Tier of pods without the tier label; name one of the price book's tiers.").Default("default").StringVar(&f.Labels.DefaultTier)
	c.Flag("kubernetes.proc-root", "Where the host's /proc is (the exporter needs hostPID): process cgroups map share replicas' processes to pods.").Default("/proc").StringVar(&f.ProcRoot)
	c.Flag("kubernetes.refresh-interval", "How often the kubelet's PodResources API is read (pods come from a watch, at once).").Default("10s").DurationVar(&f.Refresh)
	return f
}

// Check says what is wrong with the flags, as a usage error naming the flag.
func (f *Flags) Check() error {
	switch {
	case !f.Enabled:
		return nil
	case f.NodeName == "":
		return usage.Errorf("--kubernetes.node-name: empty; expected this node's name in Kubernetes (or $NODE_NAME, from the downward API's spec.nodeName)")
	case f.Socket == "":
		return usage.Errorf("--kubernetes.pod-resources-socket: empty; expected the kubelet's PodResources socket, e.g. %s", DefaultSocket)
	case f.Labels.DefaultTier == "":
		return usage.Errorf("--kubernetes.default-tier: empty; expected a tier of the price book")
	case f.Refresh <= 0:
		return usage.Errorf("--kubernetes.refresh-interval: %s; expected a positive duration", f.Refresh)
	}
	return nil
}

// Client builds the API server client: from --kubernetes.kubeconfig, else in-cluster. It does
// not connect: an unreachable server is retried by the informer.
func (f *Flags) Client() (k8sclient.Interface, error) {
	var (
		cfg *rest.Config
		err error
	)
	if f.Kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", f.Kubeconfig)
		if err != nil {
			return nil, usage.Errorf("--kubernetes.kubeconfig: %s: %v", f.Kubeconfig, err)
		}
	} else if cfg, err = rest.InClusterConfig(); err != nil {
		return nil, usage.Errorf("--kubernetes.kubeconfig: not given and not in a cluster (%v); expected a kubeconfig file", err)
	}
	cfg.UserAgent = "slicemeter-exporter"
	c, err := k8sclient.NewForConfig(cfg)
	if err != nil {
		return nil, usage.Errorf("--kubernetes.kubeconfig: %v", err)
	}
	return c, nil
}
