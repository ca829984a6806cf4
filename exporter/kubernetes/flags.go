package kubernetes

import (
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/slicemeter/slicemeter/internal/usage"
)

// DefaultSocket is where the kubelet serves its PodResources API.
const DefaultSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// Flags are what the exporter's --kubernetes.* flags say (cmd/slicemeter registers them).
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
func (f *Flags) Client() (PodAPI, error) {
	cfg, err := f.RESTConfig()
	if err != nil {
		return nil, err
	}
	c, err := newRESTPods(cfg)
	if err != nil {
		return nil, usage.Errorf("--kubernetes.kubeconfig: %v", err)
	}
	return c, nil
}

// RESTConfig is the API server's address and credentials: from --kubernetes.kubeconfig, else
// in-cluster.
func (f *Flags) RESTConfig() (*rest.Config, error) {
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
	return cfg, nil
}
