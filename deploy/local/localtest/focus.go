package localtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local"
)

// ValidateFOCUS has the FinOps Foundation's FOCUS validator check a FOCUS file, CSV or Parquet
// (local.ValidateFOCUS); it fails t naming each broken rule. Without the validator installed it
// skips with how to install it, except in CI ($CI set), where it fails.
func ValidateFOCUS(t testing.TB, file string) {
	t.Helper()
	SkipShort(t, "the FOCUS validator (python)")
	if _, err := local.FocusValidator(); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("%v", err)
		}
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := local.ValidateFOCUS(ctx, file); err != nil {
		t.Fatal(err)
	}
}
