package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/api"
	"github.com/slicemeter/slicemeter/attribution/api/auth"
	"github.com/slicemeter/slicemeter/e2e/apptest"
)

// `slicemeter api token hash --role … --tenant …` prints an entry ready for the auth file (it
// printed placeholders to edit): the entries concatenated under "tokens:" are a file that
// admits each token with its role and tenants. A role the file would refuse is exit 2 naming
// the flag.
func TestTokenHashPrintsAReadyEntry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tokens := []struct {
		name, token string
		args        []string
		role        api.Role
		tenants     []string
	}{
		{"ops", "ops-0123456789abcdef", []string{"--role", "operator"}, api.RoleOperator, nil},
		{"acme", "acme-0123456789abcdef", []string{"--role", "tenant", "--tenant", "acme"}, api.RoleTenant, []string{"acme"}},
		{"slurm", "slurm-0123456789abcdef", []string{"--role", "scheduler", "--tenant", "acme", "--tenant", "beta"}, api.RoleScheduler, []string{"acme", "beta"}},
	}
	file := "tokens:\n"
	for _, tt := range tokens {
		apptest.Secret(t, tt.token)
		r := apptest.RunInput(t, ctx, tt.token+"\n", append([]string{"api", "token", "hash", "--name", tt.name}, tt.args...)...)
		if r.Code != 0 || strings.Contains(r.Stdout, "TENANT") || strings.Contains(r.Stdout, "#") {
			t.Fatalf("api token hash %v: exit %d, want 0 and an entry without placeholders:\n%s%s", tt.args, r.Code, r.Stdout, r.Stderr)
		}
		file += r.Stdout
	}
	a, err := auth.Parse("auth.yaml", []byte(file))
	if err != nil {
		t.Fatalf("the printed entries are not an auth file: %v\n%s", err, file)
	}
	for _, tt := range tokens {
		req, _ := http.NewRequest(http.MethodGet, "/api/v1/report", nil)
		req.Header.Set("Authorization", "Bearer "+tt.token)
		p, err := a.Principal(req)
		if err != nil || p.Name != tt.name || p.Role != tt.role || strings.Join(p.Tenants, ",") != strings.Join(tt.tenants, ",") {
			t.Errorf("%s: principal %+v, %v; want role %s, tenants %v", tt.name, p, err, tt.role, tt.tenants)
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--role", "tenant"}, "--role tenant: expected --tenant NAME"},
		{[]string{"--role", "finance", "--tenant", "acme"}, "--tenant acme: expected none for --role finance"},
		{[]string{"--role", "admin"}, `--role "admin": expected one of operator, finance, scheduler, tenant`},
	} {
		r := apptest.RunInput(t, ctx, "acme-0123456789abcdef\n", append([]string{"api", "token", "hash"}, tt.args...)...)
		if r.Code != 2 || !strings.Contains(r.Stderr, tt.want) {
			t.Errorf("api token hash %v: exit %d, want 2 naming %q:\n%s", tt.args, r.Code, tt.want, r.Stderr)
		}
	}
}
