package migrations

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/internal/usage"
)

// Column is a table's column that a migration creates.
type Column struct{ Table, Name string }

func (c Column) String() string { return c.Table + "." + c.Name }

// dropColumn matches "ALTER TABLE t DROP COLUMN [IF EXISTS] c": 1 the table, 2 the column.
var dropColumn = regexp.MustCompile(`(?is)^\s*ALTER\s+TABLE\s+([A-Za-z_][A-Za-z0-9_]*)\s+DROP\s+COLUMN\s+(?:IF\s+EXISTS\s+)?([A-Za-z_][A-Za-z0-9_]*)\b`)

// columnName is the first identifier of an item of a CREATE TABLE column list.
var columnName = regexp.MustCompile("^\\s*`?([A-Za-z_][A-Za-z0-9_]*)`?\\s")

// Columns returns, for each migration of all (in order), the columns that it creates and that
// the migrations after it keep: its CREATE TABLE column lists and ADD COLUMN statements, less
// those a later DROP COLUMN, or DROP TABLE of their table, removes.
func Columns(all []Migration) (map[uint32][]Column, error) {
	introduced := map[Column]uint32{}
	for _, m := range all {
		for _, stmt := range m.Statements {
			if a := addColumn.FindStringSubmatch(stmt); a != nil {
				introduced[Column{a[2], a[5]}] = m.Version
				continue
			}
			if d := dropColumn.FindStringSubmatch(stmt); d != nil {
				delete(introduced, Column{d[1], d[2]})
				continue
			}
			if d := dropTable.FindStringSubmatch(strings.TrimSpace(stmt)); d != nil {
				for c := range introduced {
					if c.Table == d[1] {
						delete(introduced, c)
					}
				}
				continue
			}
			head := createTableHead.FindStringSubmatchIndex(stmt)
			if head == nil {
				continue
			}
			table := stmt[head[4]:head[5]]
			end, err := matchParen(stmt, head[1]-1)
			if err != nil {
				return nil, fmt.Errorf("migration %s: table %s: column list: %w", m.Name, table, err)
			}
			for _, item := range splitTopLevel(stmt[head[1]:end]) {
				name := columnName.FindStringSubmatch(item + " ")
				if name == nil || strings.EqualFold(name[1], "INDEX") {
					continue
				}
				introduced[Column{table, name[1]}] = m.Version
			}
		}
	}
	cols := map[uint32][]Column{}
	for c, v := range introduced {
		cols[v] = append(cols[v], c)
	}
	for _, cs := range cols {
		sort.Slice(cs, func(i, j int) bool { return cs[i].String() < cs[j].String() })
	}
	return cols, nil
}

// splitTopLevel splits s on the commas outside parentheses and string literals.
func splitTopLevel(s string) []string {
	var (
		items []string
		depth int
		start int
		quote byte
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"' || c == '`':
			quote = c
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == ',' && depth == 0:
			items = append(items, s[start:i])
			start = i + 1
		}
	}
	return append(items, s[start:])
}

// CheckSchema compares the connection's current database with the embedded migrations, so that
// a component does not start against a schema it cannot write or read: a recorded migration
// this build does not know (a newer slicemeter migrated the database), and a column an embedded
// migration creates that the database lacks (a damaged schema, or one not migrated yet), are
// usage errors naming them. A migration this node does not record is fine when its columns
// are there: on a cluster, only the node that ran `migrate --cluster` records them.
func CheckSchema(ctx context.Context, conn driver.Conn) error {
	s, err := readSchema(ctx, conn)
	if err != nil {
		return err
	}
	if err := s.unknown(); err != nil {
		return err
	}
	return s.missing()
}

// schema is what CheckSchema compares.
type schema struct {
	database string
	all      []Migration
	want     map[uint32][]Column
	have     map[Column]bool
	recorded map[uint32]string
}

func readSchema(ctx context.Context, conn driver.Conn) (*schema, error) {
	s := &schema{recorded: map[uint32]string{}}
	var err error
	if s.all, err = All(); err != nil {
		return nil, err
	}
	if s.want, err = Columns(s.all); err != nil {
		return nil, err
	}
	if err := conn.QueryRow(ctx, "SELECT currentDatabase()").Scan(&s.database); err != nil {
		return nil, fmt.Errorf("check the schema: read the current database: %w", err)
	}
	if s.have, err = existingColumns(ctx, conn); err != nil {
		return nil, err
	}
	if s.have[Column{Table, "version"}] {
		if s.recorded, err = Applied(ctx, conn); err != nil {
			return nil, fmt.Errorf("check the schema: %w", err)
		}
	}
	return s, nil
}

// unknown fails if the database records a migration that is not embedded.
func (s *schema) unknown() error {
	known := map[uint32]bool{}
	for _, m := range s.all {
		known[m.Version] = true
	}
	var unknown []string
	for v, name := range s.recorded {
		if !known[v] {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return usage.Errorf("clickhouse database %s records migration %s, which this slicemeter (latest %s) does not know: "+
		"a newer slicemeter migrated it; run that version", s.database, strings.Join(unknown, ", "), s.all[len(s.all)-1].Name)
}

// missing fails if a table or column that an embedded migration creates is missing: once,
// naming the migrations not applied (the first and last where they are many), what they would
// create (the first few), the schema's version and the one this build needs, and a damaged
// schema (a migration recorded whose tables or columns are gone) migration by migration.
func (s *schema) missing() error {
	tables := map[string]bool{}
	for c := range s.have {
		tables[c.Table] = true
	}
	var (
		damaged            []string
		notApplied, absent []string
		recordedUpTo       = "none"
	)
	for _, m := range s.all {
		if _, ok := s.recorded[m.Version]; ok {
			recordedUpTo = m.Name
		}
	}
	seen := map[string]bool{}
	for _, m := range s.all {
		var missing []string
		for _, c := range s.want[m.Version] {
			switch {
			case s.have[c]:
			case !tables[c.Table]:
				if !seen[c.Table] {
					missing = append(missing, "table "+c.Table)
				}
				seen[c.Table] = true
			default:
				missing = append(missing, "column "+c.String())
			}
		}
		if len(missing) == 0 {
			continue
		}
		if _, ok := s.recorded[m.Version]; ok {
			damaged = append(damaged, fmt.Sprintf("migration %s is recorded but %s is missing (a damaged schema)", m.Name, strings.Join(missing, ", ")))
		} else {
			notApplied = append(notApplied, m.Name)
			absent = append(absent, missing...)
		}
	}
	var problems []string
	if len(notApplied) > 0 {
		problems = append(problems, fmt.Sprintf("%s not applied (%s missing); its schema is at %s, this slicemeter needs %s: "+
			"run slicemeter migrate with the same --clickhouse.dsn",
			migrationList(notApplied, len(s.want)), firstFew(absent, 6), recordedUpTo, s.all[len(s.all)-1].Name))
	}
	problems = append(problems, damaged...)
	if len(problems) == 0 {
		return nil
	}
	return usage.Errorf("clickhouse database %s does not have the schema this slicemeter needs: %s", s.database, strings.Join(problems, "; "))
}

// migrationList names the migrations not applied: all of a few, the first and last of many.
func migrationList(names []string, of int) string {
	switch {
	case len(names) == 1:
		return "migration " + names[0] + " is"
	case len(names) <= 3:
		return "migrations " + strings.Join(names, ", ") + " are"
	default:
		return fmt.Sprintf("%d of the %d migrations that create tables or columns, %s to %s, are", len(names), of, names[0], names[len(names)-1])
	}
}

// firstFew joins the first n of items and counts the rest.
func firstFew(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

// refuseUnknown is CheckSchema's first half, for OpenMigrated before it applies anything.
func refuseUnknown(ctx context.Context, conn driver.Conn) error {
	s, err := readSchema(ctx, conn)
	if err != nil {
		return err
	}
	return s.unknown()
}

// existingColumns returns the columns of the current database's tables.
func existingColumns(ctx context.Context, conn driver.Conn) (map[Column]bool, error) {
	rows, err := conn.Query(ctx, "SELECT table, name FROM system.columns WHERE database = currentDatabase()")
	if err != nil {
		return nil, fmt.Errorf("check the schema: read system.columns: %w", err)
	}
	defer rows.Close()
	have := map[Column]bool{}
	for rows.Next() {
		var c Column
		if err := rows.Scan(&c.Table, &c.Name); err != nil {
			return nil, fmt.Errorf("check the schema: read system.columns: %w", err)
		}
		have[c] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("check the schema: read system.columns: %w", err)
	}
	return have, nil
}
