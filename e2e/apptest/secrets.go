package apptest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// The secrets scan (docs/development.md, "Tests"): every password and token a test registers with Secret
// is looked for, once the whole run is over (Main), in everything the binary wrote: each
// service's log, each command's stderr, and each service's /metrics as Stop fetched it. They
// are kept, for that, in one directory per test binary (outputs), removed by Main.

// minSecret is the shortest secret Secret takes: a shorter one would match by chance.
const minSecret = 6

// captured is the run's record of secrets and of where the binary's output was kept.
var captured struct {
	mu      sync.Mutex
	dir     string
	err     error
	n       int // files made, for unique names
	secrets []secret
}

// secret is a registered secret and the test that registered it (named in a finding; the
// secret itself never is).
type secret struct{ value, test string }

// Secret registers s, a password or token t gives the binary, for the scan at the end of the
// run: any log line, stderr line or metric holding it fails the run.
func Secret(t testing.TB, s string) {
	t.Helper()
	if len(s) < minSecret {
		t.Fatalf("apptest.Secret: a secret of %d characters; expected at least %d (a shorter one would match by chance)", len(s), minSecret)
	}
	captured.mu.Lock()
	defer captured.mu.Unlock()
	captured.secrets = append(captured.secrets, secret{s, t.Name()})
}

// outputFile creates a file for the binary's output in the run's directory, named after the
// test and what it holds.
func outputFile(t testing.TB, what string) (*os.File, error) {
	captured.mu.Lock()
	defer captured.mu.Unlock()
	if captured.dir == "" && captured.err == nil {
		captured.dir, captured.err = os.MkdirTemp("", "slicemeter-apptest-output-")
	}
	if captured.err != nil {
		return nil, fmt.Errorf("creating the directory of the run's output: %w", captured.err)
	}
	captured.n++
	name := fmt.Sprintf("%03d-%s-%s", captured.n, unsafeName.ReplaceAllString(t.Name(), "_"), what)
	f, err := os.Create(filepath.Join(captured.dir, name))
	if err != nil {
		return nil, fmt.Errorf("creating a file of the run's output: %w", err)
	}
	return f, nil
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// keepOutput writes text to a new output file (a command's stderr); empty text makes none.
func keepOutput(t testing.TB, what, text string) {
	if text == "" {
		return
	}
	f, err := outputFile(t, what)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Errorf("keeping %s: %v", what, err)
	}
}

// keepMetrics fetches the running service's /metrics into an output file. A service whose
// /metrics needs credentials answers 401, which holds nothing worth scanning.
func (p *Process) keepMetrics(t testing.TB) {
	if p.Addr() == "" {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL("/metrics"), nil)
	if err != nil {
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return // stopping anyway: a service that cannot answer has nothing to show
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if resp.StatusCode == http.StatusOK {
		keepOutput(t, p.name+".metrics", string(body))
	}
}

// scanSecrets looks for every registered secret in every output file, line by line, and
// returns one finding per file and line that holds one, naming the file, the line and the
// test that registered the secret, never the secret.
func scanSecrets() ([]string, error) {
	captured.mu.Lock()
	dir, secrets := captured.dir, captured.secrets
	captured.mu.Unlock()
	if dir == "" || len(secrets) == 0 {
		return nil, nil
	}
	var findings []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			for i, s := range secrets {
				if strings.Contains(line, s.value) {
					findings = append(findings, fmt.Sprintf("%s:%d holds secret %d (registered by %s)", path, n, i+1, s.test))
				}
			}
		}
		return sc.Err()
	})
	if err != nil {
		return findings, fmt.Errorf("scanning the run's output for secrets: %w", err)
	}
	return findings, nil
}
