package migrations

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Cluster mode (slicemeter migrate --cluster NAME).
//
// The SQL files stay the single-node schema; ClusterStatements derives the clustered schema
// from each CREATE TABLE statement, so there is one schema to maintain. For a table T:
//
//   - T_local (LocalSuffix) on every node, created ON CLUSTER, with the engine made Replicated:
//     ReplacingMergeTree(v) becomes
//     ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/DB.T_local', '{replica}', v),
//     the same columns, PARTITION BY and ORDER BY. The {shard} and {replica} macros come from
//     each server's <macros>.
//   - T itself, created ON CLUSTER, a Distributed table over T_local on every shard. Collectors
//     insert into T and queries read T, so every existing query works unchanged.
//
// The sharding key is cityHash64 of the first column of T's ORDER BY: every version of a row
// (ReplacingMergeTree's key starts with that column) lands on the same shard, where merges can
// collapse them, and a node's samples and rollups (keyed by node first) stay together.
//
// Clients of a cluster need two settings (ClusterSettings): writes must reach the shards before
// the collector recomputes rollups from them, and queries with an IN subquery over a
// Distributed table (attribution's latest-pass filter) must run the subquery once over the
// whole cluster rather than be refused by ClickHouse.

// LocalSuffix names the per-node Replicated table behind a Distributed table: samples_local
// behind samples.
const LocalSuffix = "_local"

// ClusterSettings are the ClickHouse settings every client of a clustered schema needs. Set them
// in the user profile of the cluster's servers (users.xml, <profiles><default>): clickhouse-go
// sends only numeric settings to an 18.16 server, so distributed_product_mode cannot come in a
// DSN there (current servers take both as DSN parameters too).
//   - insert_distributed_sync=1: an INSERT into a Distributed table returns once the shards
//     have the rows (by default it queues them on the local disk and sends them later), so the
//     collector's rollups, computed right after each insert, see them.
//   - distributed_product_mode=global: `x IN (SELECT ... FROM distributed)` inside a query on
//     a Distributed table runs the subquery once over the cluster (GLOBAL IN); ClickHouse's
//     default, deny, refuses such queries.
var ClusterSettings = map[string]string{
	"insert_distributed_sync":  "1",
	"distributed_product_mode": "global",
}

// CheckClusterSettings returns an error naming each of ClusterSettings that the connection's
// session does not have.
func CheckClusterSettings(ctx context.Context, conn driver.Conn) error {
	rows, err := conn.Query(ctx, "SELECT name, value FROM system.settings WHERE name IN ('insert_distributed_sync', 'distributed_product_mode')")
	if err != nil {
		return fmt.Errorf("read the session's settings: %w", err)
	}
	defer rows.Close()
	have := map[string]string{}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return fmt.Errorf("read the session's settings: %w", err)
		}
		have[name] = value
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the session's settings: %w", err)
	}
	var wrong []string
	for _, name := range []string{"insert_distributed_sync", "distributed_product_mode"} {
		if want := ClusterSettings[name]; have[name] != want {
			wrong = append(wrong, fmt.Sprintf("%s is %q, want %q", name, have[name], want))
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("clustered schema: %s (set them in the servers' user profile)", strings.Join(wrong, "; "))
	}
	return nil
}

// modifyColumn is addColumn for "MODIFY COLUMN name type ..." (a column's type or default
// changed in place: the Distributed table is made again over the local table's new columns).
var modifyColumn = regexp.MustCompile(`(?is)^\s*ALTER\s+TABLE\s+(?:([A-Za-z_][A-Za-z0-9_]*)\.)?([A-Za-z_][A-Za-z0-9_]*)\s+` +
	`(?:ON\s+CLUSTER\s+([A-Za-z_][A-Za-z0-9_]*)\s+)?(MODIFY\s+COLUMN\s+([A-Za-z_][A-Za-z0-9_]*)\s.*)$`)

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidClusterName reports whether name can name a cluster here: letters, digits and '_', not
// starting with a digit, so that it goes into DDL unquoted and unambiguously.
func ValidClusterName(name string) error {
	if !identifier.MatchString(name) {
		return fmt.Errorf("cluster name %q: only letters, digits and '_' are allowed, not starting with a digit", name)
	}
	return nil
}

// createTableHead matches the start of a migration's CREATE TABLE statement up to its column
// list's '('.
var createTableHead = regexp.MustCompile(`(?is)^CREATE\s+TABLE\s+(IF\s+NOT\s+EXISTS\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*\(`)

// engineHead matches `ENGINE = Name(` after the column list.
var engineHead = regexp.MustCompile(`(?is)^\s*ENGINE\s*=\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(`)

// orderByFirst finds the first column of ORDER BY, with or without parentheses.
var orderByFirst = regexp.MustCompile(`(?is)\bORDER\s+BY\s*\(?\s*([A-Za-z_][A-Za-z0-9_]*)`)

// ClusterStatements turns one single-node migration statement into its statements on cluster
// for database. CREATE TABLE of a *MergeTree engine becomes the Replicated local table, then
// the Distributed table, and records the table's sharding key in keys. ALTER TABLE T ADD
// COLUMN or MODIFY COLUMN (of a table in keys) becomes the same ALTER ON CLUSTER of T_local, then the
// Distributed table T dropped and created again AS T_local: ClickHouse 18.16 refuses ALTER ON
// CLUSTER of a Distributed table over replicated shards, and a Distributed table holds no data
// (inserts are synchronous, ClusterSettings). Anything else is an error naming the statement,
// so that a future migration gets a cluster form written on purpose instead of being run on
// one node only.
func ClusterStatements(stmt, database, cluster string, keys map[string]string) ([]string, error) {
	if err := ValidClusterName(cluster); err != nil {
		return nil, err
	}
	if !identifier.MatchString(database) {
		return nil, fmt.Errorf("database name %q: only letters, digits and '_' are allowed", database)
	}
	// Only the single-node form: no database, no cluster of its own.
	m := addColumn.FindStringSubmatch(stmt)
	if m == nil {
		m = modifyColumn.FindStringSubmatch(stmt)
	}
	if m != nil && m[1] == "" && m[3] == "" {
		table, add := m[2], strings.TrimSpace(m[4])
		key, ok := keys[table]
		if !ok {
			return nil, fmt.Errorf("ALTER TABLE %s: no earlier CREATE TABLE %s to take its sharding key from", table, table)
		}
		return []string{
			"ALTER TABLE " + database + "." + table + LocalSuffix + " ON CLUSTER " + cluster + " " + add,
			"DROP TABLE IF EXISTS " + database + "." + table + " ON CLUSTER " + cluster,
			"CREATE TABLE IF NOT EXISTS " + database + "." + table + " ON CLUSTER " + cluster + " AS " + database + "." + table + LocalSuffix +
				fmt.Sprintf(" ENGINE = Distributed(%s, %s, %s, cityHash64(%s))", quoteString(cluster), quoteString(database), quoteString(table+LocalSuffix), key),
		}, nil
	}
	if stmts, ok, err := rebuildStatements(stmt, database, cluster, keys); ok || err != nil {
		return stmts, err
	}
	head := createTableHead.FindStringSubmatchIndex(stmt)
	if head == nil {
		return nil, fmt.Errorf("cluster mode supports only CREATE TABLE name (...), CREATE TABLE name AS other ENGINE = ..., "+
			"ALTER TABLE name ADD or MODIFY COLUMN, INSERT INTO ... SELECT, RENAME TABLE and DROP TABLE IF EXISTS statements, not %q", firstLine(stmt))
	}
	ifNotExists := head[2] >= 0
	table := stmt[head[4]:head[5]]
	colsStart := head[1] - 1 // the '('
	colsEnd, err := matchParen(stmt, colsStart)
	if err != nil {
		return nil, fmt.Errorf("table %s: column list: %w", table, err)
	}
	columns := stmt[colsStart : colsEnd+1]
	rest := stmt[colsEnd+1:]
	eng := engineHead.FindStringSubmatchIndex(rest)
	if eng == nil {
		return nil, fmt.Errorf("table %s: no ENGINE = Name(...) after the column list", table)
	}
	replicated, clauses, order, err := replicatedEngine(table, database, rest, eng)
	if err != nil {
		return nil, err
	}

	local := table + LocalSuffix
	create := "CREATE TABLE "
	if ifNotExists {
		create += "IF NOT EXISTS "
	}
	localStmt := create + database + "." + local + " ON CLUSTER " + cluster + " " + columns +
		" ENGINE = " + replicated + clauses
	if keys != nil {
		keys[table] = order
	}
	distStmt := create + database + "." + table + " ON CLUSTER " + cluster + " " + columns +
		fmt.Sprintf(" ENGINE = Distributed(%s, %s, %s, cityHash64(%s))",
			quoteString(cluster), quoteString(database), quoteString(local), order)
	return []string{localStmt, distStmt}, nil
}

// replicatedEngine is the Replicated form of the engine that eng matched in rest (what
// follows a table's column list or AS), the clauses after it (PARTITION BY, ORDER BY,
// SETTINGS: unchanged) and the first column of their ORDER BY.
func replicatedEngine(table, database, rest string, eng []int) (replicated, clauses, order string, err error) {
	engine := rest[eng[2]:eng[3]]
	if !strings.HasSuffix(engine, "MergeTree") || strings.HasPrefix(engine, "Replicated") {
		return "", "", "", fmt.Errorf("table %s: engine %s: cluster mode replicates only non-replicated *MergeTree engines", table, engine)
	}
	paramsStart := eng[1] - 1
	paramsEnd, err := matchParen(rest, paramsStart)
	if err != nil {
		return "", "", "", fmt.Errorf("table %s: engine parameters: %w", table, err)
	}
	params := strings.TrimSpace(rest[paramsStart+1 : paramsEnd])
	clauses = rest[paramsEnd+1:]
	first := orderByFirst.FindStringSubmatch(clauses)
	if first == nil {
		return "", "", "", fmt.Errorf("table %s: no ORDER BY to derive the sharding key from", table)
	}
	// The ZooKeeper path names the database and table literally: 18.16 has no {database} or
	// {table} macros. One path per shard; the replicas of a shard share it.
	replicated = fmt.Sprintf("Replicated%s(%s, '{replica}'", engine, quoteString("/clickhouse/tables/{shard}/"+database+"."+table+LocalSuffix))
	if params != "" {
		replicated += ", " + params
	}
	return replicated + ")", clauses, first[1], nil
}

// The statements of a migration that rebuilds a table (a new sorting key, which 18.16 cannot
// change in place): CREATE TABLE new AS old ENGINE = ..., INSERT INTO new ... SELECT ... FROM
// old, RENAME TABLE old TO spare, new TO old, DROP TABLE IF EXISTS spare.
var (
	createTableAs = regexp.MustCompile(`(?is)^CREATE\s+TABLE\s+IF\s+NOT\s+EXISTS\s+([A-Za-z_][A-Za-z0-9_]*)\s+AS\s+([A-Za-z_][A-Za-z0-9_]*)\s+`)
	insertSelect  = regexp.MustCompile(`(?is)^INSERT\s+INTO\s+[A-Za-z_][A-Za-z0-9_]*\s*\(`)
	dropTable     = regexp.MustCompile(`(?is)^DROP\s+TABLE\s+IF\s+EXISTS\s+([A-Za-z_][A-Za-z0-9_]*)\s*$`)
)

// rebuildStatements is ClusterStatements for the statements of a table's rebuild; ok is false
// for any other statement.
//   - CREATE TABLE IF NOT EXISTS new AS old ENGINE = ...: new_local AS old_local, replicated,
//     and the Distributed new over it, sharded as old is (so no row changes shard).
//   - INSERT INTO ... SELECT: unchanged, run on this node through the Distributed tables
//     (inserts are synchronous, ClusterSettings).
//   - RENAME TABLE a TO b, ...: the local tables renamed ON CLUSTER, then each Distributed
//     table dropped and made again under its new name over the renamed local table. The
//     ZooKeeper path of a replicated table stays the one it was created with.
//   - DROP TABLE IF EXISTS t: the Distributed t and t_local, ON CLUSTER.
func rebuildStatements(stmt, database, cluster string, keys map[string]string) ([]string, bool, error) {
	if keys == nil {
		keys = map[string]string{}
	}
	on := " ON CLUSTER " + cluster
	dist := func(table, key string) string {
		return "CREATE TABLE IF NOT EXISTS " + database + "." + table + on + " AS " + database + "." + table + LocalSuffix +
			fmt.Sprintf(" ENGINE = Distributed(%s, %s, %s, cityHash64(%s))", quoteString(cluster), quoteString(database), quoteString(table+LocalSuffix), key)
	}
	if m := createTableAs.FindStringSubmatchIndex(stmt); m != nil {
		table, from := stmt[m[2]:m[3]], stmt[m[4]:m[5]]
		key, ok := keys[from]
		if !ok {
			return nil, true, fmt.Errorf("CREATE TABLE %s AS %s: no earlier CREATE TABLE %s to take its sharding key from", table, from, from)
		}
		rest := stmt[m[1]:]
		eng := engineHead.FindStringSubmatchIndex(rest)
		if eng == nil {
			return nil, true, fmt.Errorf("table %s: no ENGINE = Name(...) after AS %s", table, from)
		}
		replicated, clauses, _, err := replicatedEngine(table, database, rest, eng)
		if err != nil {
			return nil, true, err
		}
		keys[table] = key
		return []string{
			"CREATE TABLE IF NOT EXISTS " + database + "." + table + LocalSuffix + on + " AS " + database + "." + from + LocalSuffix +
				" ENGINE = " + replicated + clauses,
			dist(table, key),
		}, true, nil
	}
	if insertSelect.MatchString(stmt) {
		return []string{stmt}, true, nil
	}
	if pairs := renames(stmt); pairs != nil {
		var locals, drops, creates []string
		renamed := map[string]string{}
		for _, p := range pairs {
			if p[0].database != "" || p[1].database != "" {
				return nil, true, fmt.Errorf("RENAME TABLE %s: only the single-node form, without a database", firstLine(stmt))
			}
			key, ok := keys[p[0].name]
			if !ok {
				return nil, true, fmt.Errorf("RENAME TABLE %s: no earlier CREATE TABLE %s to take its sharding key from", p[0].name, p[0].name)
			}
			locals = append(locals, database+"."+p[0].name+LocalSuffix+" TO "+database+"."+p[1].name+LocalSuffix)
			drops = append(drops, "DROP TABLE IF EXISTS "+database+"."+p[0].name+on)
			creates = append(creates, dist(p[1].name, key))
			renamed[p[1].name] = key
		}
		for _, p := range pairs {
			delete(keys, p[0].name)
		}
		for table, key := range renamed {
			keys[table] = key
		}
		out := append([]string{"RENAME TABLE " + strings.Join(locals, ", ") + on}, drops...)
		return append(out, creates...), true, nil
	}
	if m := dropTable.FindStringSubmatch(stmt); m != nil {
		delete(keys, m[1])
		return []string{
			"DROP TABLE IF EXISTS " + database + "." + m[1] + on,
			"DROP TABLE IF EXISTS " + database + "." + m[1] + LocalSuffix + on,
		}, true, nil
	}
	return nil, false, nil
}

// matchParen returns the index of the ')' closing the '(' at open, skipping string literals,
// back-quoted identifiers and -- comments.
func matchParen(s string, open int) (int, error) {
	depth := 0
	for i := open; i < len(s); i++ {
		switch c := s[i]; c {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i, nil
			}
		case '\'', '`', '"':
			for i++; i < len(s) && s[i] != c; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		case '-':
			if i+1 < len(s) && s[i+1] == '-' {
				for i < len(s) && s[i] != '\n' {
					i++
				}
			}
		}
	}
	return 0, fmt.Errorf("no ')' closes the '(' at offset %d", open)
}

// quoteString writes s as a ClickHouse string literal.
func quoteString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// ClusterMigrations is All() with each statement replaced by its ClusterStatements for
// database and cluster.
func ClusterMigrations(database, cluster string) ([]Migration, error) {
	all, err := All()
	if err != nil {
		return nil, err
	}
	keys := map[string]string{}
	for i, m := range all {
		var stmts []string
		for j, stmt := range m.Statements {
			cs, err := ClusterStatements(stmt, database, cluster, keys)
			if err != nil {
				return nil, fmt.Errorf("migration %s (statement %d of %d) in cluster mode: %w", m.Name, j+1, len(m.Statements), err)
			}
			stmts = append(stmts, cs...)
		}
		all[i].Statements = stmts
	}
	return all, nil
}

// ApplyCluster is Apply for a cluster: it creates the connection's current database on every
// node of cluster (ON CLUSTER), then applies every migration not yet recorded in this node's
// schema_migrations in its cluster form (ClusterStatements), and records it there. ON CLUSTER
// DDL runs through ZooKeeper on every node and each statement returns once all nodes ran it
// (or after the server's distributed_ddl_task_timeout, 180 s by default, with an error naming
// the hosts that did not). Every statement is CREATE ... IF NOT EXISTS, so running it again from
// another node, or after a node joined the cluster, creates only what is missing.
//
// A pending migration whose table already exists on this node as a single-node table (from
// Apply) is refused: that data would not be replicated nor seen through the Distributed table.
func ApplyCluster(ctx context.Context, conn driver.Conn, cluster string) ([]string, error) {
	if err := ValidClusterName(cluster); err != nil {
		return nil, err
	}
	var database string
	if err := conn.QueryRow(ctx, "SELECT currentDatabase()").Scan(&database); err != nil {
		return nil, fmt.Errorf("read the current database: %w", err)
	}
	var shards uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.clusters WHERE cluster = ?", cluster).Scan(&shards); err != nil {
		return nil, fmt.Errorf("look up cluster %s in system.clusters: %w", cluster, err)
	}
	if shards == 0 {
		return nil, fmt.Errorf("cluster %s is not defined on this server (system.clusters; <remote_servers> in its config)", cluster)
	}
	single, err := All()
	if err != nil {
		return nil, err
	}
	tables := map[uint32][]string{} // the tables each migration creates, by version
	for _, m := range single {
		for _, stmt := range m.Statements {
			if head := createTableHead.FindStringSubmatch(stmt); head != nil {
				tables[m.Version] = append(tables[m.Version], head[2])
			}
		}
	}
	all, err := ClusterMigrations(database, cluster)
	if err != nil {
		return nil, err
	}
	if err := conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+database+" ON CLUSTER "+cluster); err != nil {
		return nil, fmt.Errorf("create database %s on cluster %s: %w", database, cluster, err)
	}
	return apply(ctx, conn, all, func(ctx context.Context, m Migration) error {
		return refuseSingleNodeTables(ctx, conn, database, m.Name, tables[m.Version])
	})
}

// refuseSingleNodeTables fails if one of tables, which the migration named migration creates
// as Distributed, exists on this node with another engine.
func refuseSingleNodeTables(ctx context.Context, conn driver.Conn, database, migration string, tables []string) error {
	for _, table := range tables {
		var engine string
		err := conn.QueryRow(ctx, "SELECT any(engine) FROM system.tables WHERE database = ? AND name = ?", database, table).Scan(&engine)
		if err != nil {
			return fmt.Errorf("migration %s: look up table %s.%s: %w", migration, database, table, err)
		}
		if engine != "" && engine != "Distributed" {
			return fmt.Errorf("migration %s: table %s.%s already exists on this node with engine %s (a single-node schema); cluster mode cannot convert it", migration, database, table, engine)
		}
	}
	return nil
}
