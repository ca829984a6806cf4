package local

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKubeAPIServer starts etcd and kube-apiserver, asks /version with the admin token and
// lists namespaces with kubectl through the written kubeconfig.
func TestKubeAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts kube-apiserver")
	}
	bctx, bcancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer bcancel()
	if _, err := KubeAPIServerBinary(bctx, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	k, err := StartKubeAPIServer(ctx, KubeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()

	client, err := k.HTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.URL()+"/version", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+k.Token())
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct{ GitVersion, Major, Minor string }
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("decoding /version: %v", err)
	}
	if resp.StatusCode != http.StatusOK || v.GitVersion != "v"+KubeAPIServerVersion || v.Major != "1" || v.Minor != "31" {
		t.Errorf("/version: %s %+v, want 200 and v%s", resp.Status, v, KubeAPIServerVersion)
	}

	// Without the token the server must refuse: authentication is on.
	anon, err := http.NewRequestWithContext(ctx, http.MethodGet, k.URL()+"/api/v1/namespaces", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := client.Do(anon); err != nil {
		t.Fatal(err)
	} else {
		r.Body.Close()
		if r.StatusCode != http.StatusUnauthorized && r.StatusCode != http.StatusForbidden {
			t.Errorf("anonymous list of namespaces: %s, want 401 or 403", r.Status)
		}
	}

	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed")
	}
	kc, err := k.WriteKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", kc, "get", "namespaces", "-o", "name").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get namespaces: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "namespace/kube-system") {
		t.Errorf("kubectl get namespaces = %q, want kube-system among them", out)
	}
	dir := k.Dir()
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the directory %s is still there after Close (%v)", dir, err)
	}
}

// TestInstallDepsVersions: install-deps.sh builds the same kube-apiserver and helm into the
// same cache directories as the harness, or `make deps` would prepare nothing the tests use.
func TestInstallDepsVersions(t *testing.T) {
	b, err := os.ReadFile("install-deps.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kube_version=" + KubeAPIServerVersion + " ", "helm_version=" + HelmVersion + " ", " etcd-server"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("install-deps.sh lacks %q", want)
		}
	}
}

// TestKubeLostPortRace: only a bind failure in either log counts as a lost port race.
func TestKubeLostPortRace(t *testing.T) {
	for _, tc := range []struct {
		file, text string
		want       bool
	}{
		{"etcd.log", `{"level":"fatal","msg":"listen tcp 127.0.0.1:2379: bind: address already in use"}`, true},
		{"kube-apiserver.log", `E1201 run.go:72] "command failed" err="failed to listen on 127.0.0.1:6443: listen tcp 127.0.0.1:6443: bind: address already in use"`, true},
		{"kube-apiserver.log", `E1201 run.go:72] "command failed" err="error reading public key file"`, false},
	} {
		k := &KubeAPIServer{dir: t.TempDir()}
		if err := os.WriteFile(filepath.Join(k.dir, tc.file), []byte(tc.text+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := k.lostPortRace(); got != tc.want {
			t.Errorf("%s %q: lostPortRace() = %v, want %v", tc.file, tc.text, got, tc.want)
		}
	}
}
