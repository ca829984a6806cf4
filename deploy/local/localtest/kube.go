package localtest

import (
	"context"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local"
)

// kubeBuildTimeout bounds the first build of kube-apiserver on a machine (minutes on 2 cores;
// `make deps` does it ahead of the tests).
const kubeBuildTimeout = 30 * time.Minute

// NewKubeAPIServer is a real kube-apiserver (over its own etcd) of t's own, closed when t ends.
// Its admin kubeconfig is written into its directory: see local.KubeAPIServer.WriteKubeconfig.
func NewKubeAPIServer(t testing.TB) *local.KubeAPIServer {
	t.Helper()
	SkipShort(t, "etcd and kube-apiserver")
	bctx, bcancel := context.WithTimeout(context.Background(), kubeBuildTimeout)
	defer bcancel()
	if _, err := local.KubeAPIServerBinary(bctx, nil); err != nil {
		t.Fatalf("building kube-apiserver (see deploy/local/install-deps.sh): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	k, err := local.StartKubeAPIServer(ctx, local.KubeOptions{})
	if err != nil {
		t.Fatalf("starting kube-apiserver (etcd-server installed? see deploy/local/install-deps.sh): %v", err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return k
}
