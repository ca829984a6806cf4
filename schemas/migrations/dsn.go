package migrations

// DefaultDSN is the ClickHouse every command that reads or writes the tables opens by default.
const DefaultDSN = "clickhouse://127.0.0.1:9000/slicemeter"
