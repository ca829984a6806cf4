package localtest

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slicemeter/slicemeter/schemas/migrations"
)

// CheckScriptWithChDB runs the embedded migrations, then script (SQL statements, each ended by
// ';'), through chDB: the current ClickHouse dialect of what a test sent to 18.16. name names
// the script's file in the failure.
func CheckScriptWithChDB(t testing.TB, name, script string) {
	t.Helper()
	dir := t.TempDir()
	var files []string
	for _, f := range migrations.Files() {
		sql, err := fs.ReadFile(migrations.FS, f)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(path, sql, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, path)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	CheckWithChDB(t, append(files, path)...)
}

// CheckQueriesWithChDB is CheckScriptWithChDB of the queries, each ended by ';'.
func CheckQueriesWithChDB(t testing.TB, name string, queries []string) {
	t.Helper()
	CheckScriptWithChDB(t, name, strings.Join(queries, ";\n")+";\n")
}
