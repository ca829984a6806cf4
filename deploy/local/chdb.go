package local

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// chdbCheck is chdb_check.py, embedded so callers need not know where this package's source is.
//
//go:embed chdb_check.py
var chdbCheck []byte

// chdbMissing is chdb_check.py's exit status when the chdb module cannot be imported.
const chdbMissing = 3

// CheckWithChDB runs the statements of sqlFiles, in order and in one fresh session, on chDB —
// current ClickHouse embedded in Python (PyPI chdb) — so SQL written for 18.16 is known to run
// on today's servers too. Relative paths are taken from the working directory. The error holds
// the file, line and statement that failed and the server's message.
func CheckWithChDB(ctx context.Context, sqlFiles ...string) error {
	if len(sqlFiles) == 0 {
		return errors.New("checking SQL with chDB: no files given")
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		return fmt.Errorf("checking SQL with chDB: python3 is missing: "+installHint+", then `pip install chdb`", "python3-pip")
	}
	args := make([]string, 0, len(sqlFiles)+1)
	dir, err := os.MkdirTemp("", "slicemeter-chdb-check-")
	if err != nil {
		return fmt.Errorf("checking SQL with chDB: %w", err)
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "chdb_check.py")
	if err := os.WriteFile(script, chdbCheck, 0o644); err != nil {
		return fmt.Errorf("checking SQL with chDB: writing the script: %w", err)
	}
	args = append(args, script)
	for _, f := range sqlFiles {
		abs, err := filepath.Abs(f)
		if err != nil {
			return fmt.Errorf("checking SQL with chDB: %w", err)
		}
		args = append(args, abs)
	}
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit) && exit.ExitCode() == chdbMissing:
		return fmt.Errorf("checking SQL with chDB: the Python module chdb is missing; install it with `pip install chdb` (or run `make deps`): %s", strings.TrimSpace(out.String()))
	default:
		return fmt.Errorf("checking SQL with chDB: %w\n%s", err, strings.TrimSpace(out.String()))
	}
}
