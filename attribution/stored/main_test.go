package stored_test

import (
	"testing"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
)

// The tests share the binary's ClickHouse 18.16 (chtest.NewDatabase); TestMain stops it.
func TestMain(m *testing.M) { localtest.Main(m) }
