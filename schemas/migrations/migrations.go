// Package migrations holds slicemeter's ClickHouse schema as embedded SQL files and applies
// them in order, recording each in the table schema_migrations.
//
// Every file must run on ClickHouse 18.16 and on current ClickHouse (schemas/README.md, "ClickHouse").
// A file is named NNNN_what.sql; NNNN is its version. A file holds one statement, or several
// separated by ';' at the end of a line.
package migrations

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// FS holds the migration files under sql/.
//
//go:embed sql/*.sql
var FS embed.FS

// Dir is the directory of the migration files within FS (and within this package's source).
const Dir = "sql"

// Table records applied migrations. ClickHouse 18.16 has no transactions, so a migration is
// recorded after its statements ran; statements are written to be safe to re-run.
const Table = "schema_migrations"

const createTable = `CREATE TABLE IF NOT EXISTS ` + Table + ` (
    version UInt32,
    name String,
    applied_at DateTime
) ENGINE = MergeTree() ORDER BY version`

// Migration is one embedded SQL file.
type Migration struct {
	Version    uint32
	Name       string   // file name, e.g. 0001_samples.sql
	Statements []string // in file order, without trailing ';'
}

// Files returns the paths of the migration files within FS, in version order
// (e.g. "sql/0001_samples.sql"); relative to this package's directory they are also paths on disk.
func Files() []string {
	names, err := fs.Glob(FS, Dir+"/*.sql")
	if err != nil { // only for a malformed pattern, which this one is not
		panic(err)
	}
	sort.Strings(names)
	return names
}

// All parses every embedded migration, in version order.
func All() ([]Migration, error) {
	var all []Migration
	seen := map[uint32]string{}
	for _, file := range Files() {
		text, err := FS.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", file, err)
		}
		m, err := parse(path.Base(file), string(text))
		if err != nil {
			return nil, err
		}
		if other, dup := seen[m.Version]; dup {
			return nil, fmt.Errorf("migration %s: version %d already used by %s", m.Name, m.Version, other)
		}
		seen[m.Version] = m.Name
		all = append(all, m)
	}
	return all, nil
}

// Apply creates the migrations table if needed and applies, in order, every migration not
// yet recorded there. It returns the names of the migrations it applied now (none when the
// schema is up to date).
func Apply(ctx context.Context, conn driver.Conn) ([]string, error) {
	all, err := All()
	if err != nil {
		return nil, err
	}
	return apply(ctx, conn, all, nil)
}

// apply is Apply's loop over the given migrations (single-node or cluster form); before, if not
// nil, runs before each pending migration and can refuse it.
func apply(ctx context.Context, conn driver.Conn, all []Migration, before func(context.Context, Migration) error) ([]string, error) {
	if err := conn.Exec(ctx, createTable); err != nil {
		return nil, fmt.Errorf("create table %s: %w", Table, err)
	}
	done, err := Applied(ctx, conn)
	if err != nil {
		return nil, err
	}
	var appliedNow []string
	for _, m := range all {
		if _, ok := done[m.Version]; ok {
			continue
		}
		if before != nil {
			if err := before(ctx, m); err != nil {
				return appliedNow, err
			}
		}
		first, err := resumeAfter(ctx, conn, m.Statements)
		if err != nil {
			return appliedNow, fmt.Errorf("apply migration %s: %w", m.Name, err)
		}
		for i, stmt := range m.Statements {
			if i < first {
				continue
			}
			has, err := hasAddedColumn(ctx, conn, stmt)
			if err != nil {
				return appliedNow, fmt.Errorf("apply migration %s (statement %d of %d): %w", m.Name, i+1, len(m.Statements), err)
			}
			if has {
				continue
			}
			if err := conn.Exec(ctx, stmt); err != nil {
				return appliedNow, fmt.Errorf("apply migration %s (statement %d of %d): %w", m.Name, i+1, len(m.Statements), err)
			}
		}
		if err := record(ctx, conn, m); err != nil {
			return appliedNow, err
		}
		appliedNow = append(appliedNow, m.Name)
	}
	return appliedNow, nil
}

// addColumn parses "ALTER TABLE [db.]t [ON CLUSTER c] ADD COLUMN name ..." (one column per
// statement), the single-node form in the SQL files and the cluster form ClusterStatements
// derives from it: 1 the database, 2 the table, 3 the cluster, 4 the ADD COLUMN clause, 5 the
// column.
var addColumn = regexp.MustCompile(`(?is)^\s*ALTER\s+TABLE\s+(?:([A-Za-z_][A-Za-z0-9_]*)\.)?([A-Za-z_][A-Za-z0-9_]*)\s+` +
	`(?:ON\s+CLUSTER\s+([A-Za-z_][A-Za-z0-9_]*)\s+)?(ADD\s+COLUMN\s+([A-Za-z_][A-Za-z0-9_]*)\s.*)$`)

// hasAddedColumn reports whether stmt is an ADD COLUMN whose column this server's table already
// has. ClickHouse 18.16 has no ADD COLUMN IF NOT EXISTS, and a migration is recorded only after
// all its statements ran, so a migration interrupted halfway must be able to run again.
func hasAddedColumn(ctx context.Context, conn driver.Conn, stmt string) (bool, error) {
	m := addColumn.FindStringSubmatch(stmt)
	if m == nil {
		return false, nil
	}
	db := "currentDatabase()"
	if m[1] != "" {
		db = "'" + m[1] + "'"
	}
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.columns WHERE database = "+db+" AND table = ? AND name = ?", m[2], m[5]).Scan(&n); err != nil {
		return false, fmt.Errorf("look for column %s of table %s: %w", m[5], m[2], err)
	}
	return n > 0, nil
}

// renameTable parses "RENAME TABLE a TO b[, c TO d ...] [ON CLUSTER x]": 1 the pairs.
var renameTable = regexp.MustCompile(`(?is)^\s*RENAME\s+TABLE\s+(.*?)(?:\s+ON\s+CLUSTER\s+[A-Za-z_][A-Za-z0-9_]*)?\s*$`)

// renamePair parses one "[db.]a TO [db.]b" of a RENAME TABLE: 1, 2 the source's database and
// name, 3, 4 the target's.
var renamePair = regexp.MustCompile(`(?is)^\s*(?:([A-Za-z_][A-Za-z0-9_]*)\.)?([A-Za-z_][A-Za-z0-9_]*)\s+TO\s+(?:([A-Za-z_][A-Za-z0-9_]*)\.)?([A-Za-z_][A-Za-z0-9_]*)\s*$`)

// tableRef is a table a statement names, its database "" for the current one.
type tableRef struct{ database, name string }

// renames returns the pairs (source, target) of a RENAME TABLE statement, nil for any other.
func renames(stmt string) [][2]tableRef {
	m := renameTable.FindStringSubmatch(stmt)
	if m == nil {
		return nil
	}
	var pairs [][2]tableRef
	for _, item := range splitTopLevel(m[1]) {
		p := renamePair.FindStringSubmatch(item)
		if p == nil {
			return nil
		}
		pairs = append(pairs, [2]tableRef{{p[1], p[2]}, {p[3], p[4]}})
	}
	return pairs
}

// resumeAfter returns the index of the first statement of a migration that must run: after the
// last RENAME TABLE that already took effect (every target exists, and every source that is not
// also a target is gone), else 0. A migration that rebuilds a table (copy, then swap the names,
// then drop the old one) and was interrupted after the swap must not copy again: the copy's
// source would be the new table, and the swap would fail on the old one's name.
func resumeAfter(ctx context.Context, conn driver.Conn, stmts []string) (int, error) {
	for i := len(stmts) - 1; i >= 0; i-- {
		pairs := renames(stmts[i])
		if pairs == nil {
			continue
		}
		targets := map[tableRef]bool{}
		for _, p := range pairs {
			targets[p[1]] = true
		}
		done := true
		for _, p := range pairs {
			exists, err := tableExists(ctx, conn, p[1])
			if err != nil {
				return 0, err
			}
			if !exists {
				done = false
				break
			}
			if !targets[p[0]] {
				if exists, err = tableExists(ctx, conn, p[0]); err != nil {
					return 0, err
				}
				if exists {
					done = false
					break
				}
			}
		}
		if done {
			return i + 1, nil
		}
	}
	return 0, nil
}

func tableExists(ctx context.Context, conn driver.Conn, t tableRef) (bool, error) {
	db := "currentDatabase()"
	if t.database != "" {
		db = "'" + t.database + "'"
	}
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = "+db+" AND name = ?", t.name).Scan(&n); err != nil {
		return false, fmt.Errorf("look for table %s: %w", t.name, err)
	}
	return n > 0, nil
}

// record inserts m into the migrations table. It uses a batch, not Exec with inline VALUES,
// which ClickHouse 18.16 does not answer over the native protocol; and an explicit column list,
// which clickhouse-go/v2 needs with 18.16.
func record(ctx context.Context, conn driver.Conn, m Migration) error {
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO "+Table+" (version, name, applied_at)")
	if err != nil {
		return fmt.Errorf("record migration %s in %s: %w", m.Name, Table, err)
	}
	defer batch.Close()
	if err := batch.Append(m.Version, m.Name, time.Now().UTC().Truncate(time.Second)); err != nil {
		return fmt.Errorf("record migration %s in %s: %w", m.Name, Table, err)
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("record migration %s in %s: %w", m.Name, Table, err)
	}
	return nil
}

// Applied returns the versions recorded in the migrations table, with their file names.
func Applied(ctx context.Context, conn driver.Conn) (map[uint32]string, error) {
	rows, err := conn.Query(ctx, "SELECT version, any(name) FROM "+Table+" GROUP BY version")
	if err != nil {
		return nil, fmt.Errorf("read applied migrations from %s: %w", Table, err)
	}
	defer rows.Close()
	done := map[uint32]string{}
	for rows.Next() {
		var (
			version uint32
			name    string
		)
		if err := rows.Scan(&version, &name); err != nil {
			return nil, fmt.Errorf("read applied migrations from %s: %w", Table, err)
		}
		done[version] = name
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read applied migrations from %s: %w", Table, err)
	}
	return done, nil
}

// parse splits a migration file into its version and statements.
func parse(name, text string) (Migration, error) {
	prefix, _, ok := strings.Cut(name, "_")
	version, err := strconv.ParseUint(prefix, 10, 32)
	if !ok || err != nil || version == 0 {
		return Migration{}, fmt.Errorf("migration %s: name must start with a version number > 0 and '_' (e.g. 0001_samples.sql)", name)
	}
	m := Migration{Version: uint32(version), Name: name, Statements: splitStatements(text)}
	if len(m.Statements) == 0 {
		return Migration{}, fmt.Errorf("migration %s: no SQL statement", name)
	}
	return m, nil
}

// splitStatements splits text on ';' at the end of a line and drops whole-line '--' comments,
// so that a chunk holding only comments is not sent as an (invalid) empty query.
func splitStatements(text string) []string {
	var (
		stmts []string
		cur   []string
	)
	flush := func() {
		if s := strings.TrimSpace(strings.Join(cur, "\n")); s != "" {
			stmts = append(stmts, s)
		}
		cur = cur[:0]
	}
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "--") {
			continue
		}
		if strings.HasSuffix(trimmed, ";") {
			cur = append(cur, strings.TrimSuffix(strings.TrimRight(line, " \t\r"), ";"))
			flush()
			continue
		}
		cur = append(cur, line)
	}
	flush()
	return stmts
}
