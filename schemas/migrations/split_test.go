package migrations

import (
	"reflect"
	"testing"
)

func TestSplitStatements(t *testing.T) {
	text := `-- leading comment
CREATE TABLE a (x UInt8) ENGINE = Memory;
-- between
CREATE TABLE b (
    s String -- trailing comment; not a split
) ENGINE = Memory;

-- only a comment at the end
`
	got := splitStatements(text)
	want := []string{
		"CREATE TABLE a (x UInt8) ENGINE = Memory",
		"CREATE TABLE b (\n    s String -- trailing comment; not a split\n) ENGINE = Memory",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestParseRefusesBadNames(t *testing.T) {
	for _, name := range []string{"samples.sql", "0000_zero.sql", "x1_bad.sql"} {
		if _, err := parse(name, "SELECT 1"); err == nil {
			t.Errorf("parse(%q) accepted a bad name", name)
		}
	}
	if _, err := parse("0003_empty.sql", "-- nothing\n"); err == nil {
		t.Error("parse accepted a file without statements")
	}
}
