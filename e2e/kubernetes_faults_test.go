package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
	"github.com/slicemeter/slicemeter/exporter/kubernetes/kubelettest"
)

// TestKubernetesSourcesMissing: the real exporter with --kubernetes while the kubelet's socket is
// missing and the API server unreachable keeps sampling and serving /metrics, answers /readyz
// 503 naming both, logs each once (a minute) however often it retries, and takes the kubelet
// once its socket appears.
func TestKubernetesSourcesMissing(t *testing.T) {
	t.Parallel()
	localtest.SkipShort(t, "the exporter binary")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kubelet := kubelettest.Start(t)
	hidden := kubelet.Socket + ".hidden" // the socket is not there until renamed back
	if err := os.Rename(kubelet.Socket, hidden); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfig := writeFile(t, "kubeconfig", "apiVersion: v1\nkind: Config\n"+
		"clusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\", insecure-skip-tls-verify: true}}]\n"+
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n")
	started := time.Now()
	exp := apptest.Start(t, ctx, apptest.Service{Command: "exporter", NoReadyz: true, Args: []string{
		"--source", "sim", "--scenario", writeFile(t, "k8s.yaml", k8sScenario), "--sim.start", "now", "--spool.dir", dir,
		"--kubernetes", "--kubernetes.kubeconfig", kubeconfig, "--kubernetes.node-name", "node-a",
		"--kubernetes.pod-resources-socket", kubelet.Socket, "--kubernetes.refresh-interval", "200ms",
		"--kubernetes.default-tier", "pro", "--kubernetes.proc-root", filepath.Join(dir, "proc")}})

	readyz := func() (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, exp.URL("/readyz"), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, b.String()
	}
	// Both named, after a few refreshes (200 ms) retried both.
	waitUntil(t, ctx, "both sources failing on /readyz", func() bool {
		code, body := readyz()
		return code == http.StatusServiceUnavailable && strings.Contains(body, "127.0.0.1:1") && strings.Contains(body, kubelet.Socket)
	})
	first := metricValueText(metricsText(t, ctx, exp.URL("/metrics")), "slicemeter_exporter_samples_total")
	time.Sleep(2 * time.Second) // ten refreshes; and the sampling goes on meanwhile
	text := metricsText(t, ctx, exp.URL("/metrics"))
	if n := metricValueText(text, "slicemeter_exporter_samples_total"); n <= first {
		t.Errorf("samples_total %v then %v: the exporter stopped sampling without its Kubernetes sources", first, n)
	}
	for _, src := range []string{"kubelet", "apiserver"} {
		if !strings.Contains(text, `slicemeter_exporter_kubernetes_up{source="`+src+`"} 0`) {
			t.Errorf("/metrics: want slicemeter_exporter_kubernetes_up{source=%q} 0:\n%s", src, grepLines(text, "kubernetes_up"))
		}
		// Once a minute: a test slower than that may see a second line.
		if n := strings.Count(exp.Log(), "reason="+src); time.Since(started) < 55*time.Second && n != 1 {
			t.Errorf("%d log lines about %s in %s of retries, want 1:\n%s", n, src, time.Since(started).Round(time.Second), exp.LogTail(20))
		}
	}

	// The socket appears: the next refreshes read it (gRPC's reconnection backs off: seconds).
	if err := os.Rename(hidden, kubelet.Socket); err != nil {
		t.Fatal(err)
	}
	appeared := time.Now()
	waitUntil(t, ctx, "the kubelet read once its socket is there", func() bool {
		_, body := readyz()
		return strings.Contains(metricsText(t, ctx, exp.URL("/metrics")), `slicemeter_exporter_kubernetes_up{source="kubelet"} 1`) &&
			!strings.Contains(body, kubelet.Socket)
	})
	t.Logf("the kubelet read %s after its socket appeared (gRPC's reconnection backoff, at most 5 s)", time.Since(appeared).Round(100*time.Millisecond))
	if code, body := readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, "127.0.0.1:1") {
		t.Errorf("/readyz %d %q; want 503 naming the API server still missing", code, body)
	}
}
