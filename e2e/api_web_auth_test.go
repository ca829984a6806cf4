package e2e

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
)

// TestAPIAuthSeparateMetricsCredentials: the attribution service through the real binary,
// with a web config of basic auth and an auth file of bearer tokens: /metrics (and /readyz)
// take the basic-auth password, /api/v1 the bearer token, and neither credential opens the
// other's door.
func TestAPIAuthSeparateMetricsCredentials(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const password, token = "scrape-0123456789abcdef", "ops-0123456789abcdef"
	apptest.Secret(t, password)
	apptest.Secret(t, token)
	dir := t.TempDir()
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	webConfig, authFile := filepath.Join(dir, "web.yaml"), filepath.Join(dir, "auth.yaml")
	if err := os.WriteFile(webConfig, []byte("basic_auth_users:\n  prom: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := apptest.RunInput(t, ctx, token+"\n", "api", "token", "hash", "--name", "ops")
	entry := strings.Replace(strings.Replace(r.Stdout, "role: tenant ", "role: operator ", 1), "    tenants: [TENANT]", "    #", 1)
	if err := os.WriteFile(authFile, []byte("tokens:\n"+entry), 0o600); err != nil {
		t.Fatal(err)
	}
	dsn := localtest.Database(t, localtest.DatabaseOptions{}).DSN
	svc := apptest.Start(t, ctx, apptest.Service{Command: "attribution", NoReadyz: true, Args: []string{"--web.config.file", webConfig,
		"--api.auth-file", authFile, "--clickhouse.dsn", dsn, "--scenario", filepath.Join(scenarios, "mig-basic.yaml")}})
	get := func(path, user, bearer string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, svc.URL(path), nil)
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if code, _ := get("/readyz", "prom", ""); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the service never became ready\n%s", svc.LogTail(30))
		}
	}
	tests := []struct {
		name, path, user, bearer string
		code                     int
		has                      string
	}{
		{"metrics with the password", "/metrics", "prom", "", 200, "slicemeter_build_info"},
		{"metrics without credentials", "/metrics", "", "", 401, ""},
		{"metrics with the API token", "/metrics", "", token, 401, ""},
		{"api with its token", "/api/v1/allocations", "", token, 200, "["},
		{"api without credentials", "/api/v1/allocations", "", "", 401, "no bearer token"},
		{"api with the metrics password", "/api/v1/allocations", "prom", "", 401, "Bearer TOKEN"},
	}
	for _, tt := range tests {
		code, body := get(tt.path, tt.user, tt.bearer)
		if code != tt.code || !strings.Contains(body, tt.has) {
			t.Errorf("%s: GET %s: %d %.200q, want %d and %q", tt.name, tt.path, code, body, tt.code, tt.has)
		}
	}
}
