package e2e

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/slicemeter/slicemeter/e2e/apptest"
)

// The endpoint operators scrape: basic auth through exporter-toolkit's web config, /healthz,
// /readyz, and a /metrics that promtool accepts, for the 72-instance node of the benchmarks.
func TestExporterEndpoint(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	apptest.Secret(t, "s3cret")
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	webConfig := filepath.Join(dir, "web.yaml")
	if err := os.WriteFile(webConfig, []byte("basic_auth_users:\n  ops: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Its endpoints need the credentials: the test waits for /readyz itself.
	exp := apptest.Start(t, ctx, apptest.Service{Command: "exporter", NoReadyz: true,
		Args: []string{"--source", "sim", "--scenario", "../exporter/testdata/node72.yaml", "--web.config.file", webConfig}})
	addr := exp.Addr()
	get := func(path string, auth bool) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
		if auth {
			req.SetBasicAuth("ops", "s3cret")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if code, _ := get("/readyz", true); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the exporter never became ready\n%s", exp.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	apptest.WaitUntil(t, 30*time.Second, "a few sampling ticks", func() bool {
		_, body := get("/metrics", true)
		return metricValueText(body, "slicemeter_exporter_ticks_total") >= 3
	})
	if code, _ := get("/metrics", false); code != http.StatusUnauthorized {
		t.Errorf("/metrics without credentials: %d, want 401", code)
	}
	if code, body := get("/healthz", true); code != http.StatusOK || !strings.Contains(body, "ok") {
		t.Errorf("/healthz: %d %q", code, body)
	}
	code, body := get("/metrics", true)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d\n%s", code, body)
	}
	promtool := exec.CommandContext(ctx, "promtool", "check", "metrics")
	promtool.Stdin = strings.NewReader(body)
	if out, err := promtool.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
	for _, want := range []string{
		`slicemeter_exporter_instances{node="node-72"} 72`,
		`slicemeter_instance_sm_active_ratio{gpu="0",kind="mig",model="A100-SXM4-40GB",node="node-72",profile="1g.5gb",slice="gpu0/mig0"`,
		`slicemeter_vgpu_info{`, `slicemeter_gpu_info{`, `slicemeter_exporter_nvml_calls_total{`,
		`slicemeter_exporter_sampling_jitter_seconds_bucket{`, `slicemeter_gpu_energy_joules_total{`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, ` instance="`) || strings.Contains(body, `{instance="`) || strings.Contains(body, `tenant="`) {
		t.Error("/metrics uses the label instance or tenant")
	}
	// The scrape path never calls NVML: its time is a reported figure, not an assertion here.
	var took []time.Duration
	for range 30 {
		began := time.Now()
		if code, _ := get("/metrics", true); code != http.StatusOK {
			t.Fatalf("/metrics: %d", code)
		}
		took = append(took, time.Since(began))
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("/metrics of 72 instances: %d bytes, median %v, max of 30 %v", len(body), took[15], took[29])
	if err := exp.Stop(); err != nil {
		t.Errorf("exporter did not stop cleanly on SIGTERM: %v\n%s", err, exp.Log())
	}
}
