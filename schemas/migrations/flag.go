package migrations

import "github.com/alecthomas/kingpin/v2"

// DefaultDSN is the ClickHouse every command that reads or writes the tables opens by default.
const DefaultDSN = "clickhouse://127.0.0.1:9000/slicemeter"

// DSNFlag adds --clickhouse.dsn, the database a command opens with Open, to c.
func DSNFlag(c *kingpin.CmdClause, into *string) {
	c.Flag("clickhouse.dsn", "ClickHouse native-protocol DSN: clickhouse://host:9000/database.").Default(DefaultDSN).StringVar(into)
}
