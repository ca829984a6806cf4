package focus

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/report"
)

// TestPipelined: the rows of a stream read ahead are written in the stream's order; a
// failed write stops the stream, and a stream's failure or refusal is the export's.
func TestPipelined(t *testing.T) {
	from := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	const hours = 100 // more than aheadHours
	failRead, failWrite := errors.New("read failed"), errors.New("write failed")
	for _, tc := range []struct {
		name       string
		refuse     bool
		readFailAt int // -1: never
		writeFail  int // -1: never
		wantOK     bool
		wantErr    error
		wantHours  int
	}{
		{"every hour in order", false, -1, -1, true, nil, hours},
		{"the stream cannot", true, -1, -1, false, nil, 0},
		{"a read fails", false, 70, -1, true, failRead, 70},
		{"a write fails", false, -1, 30, true, failWrite, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := 0
			stream := func(ctx context.Context, f, to time.Time, each func(report.Window, []report.AllocationRow) error) (bool, error) {
				if tc.refuse {
					return false, nil
				}
				for h := range hours {
					if h == tc.readFailAt {
						return true, failRead
					}
					w := report.Window{Start: f.Add(time.Duration(h) * time.Hour), End: f.Add(time.Duration(h+1) * time.Hour)}
					if err := each(w, []report.AllocationRow{{AllocationID: fmt.Sprint(h)}}); err != nil {
						return true, err
					}
					read++
				}
				return true, nil
			}
			written := 0
			ok, err := pipelined(context.Background(), stream, from, from.Add(hours*time.Hour), func(w report.Window, rows []report.AllocationRow) error {
				if written == tc.writeFail {
					return failWrite
				}
				if !w.Start.Equal(from.Add(time.Duration(written)*time.Hour)) || rows[0].AllocationID != fmt.Sprint(written) {
					t.Errorf("hour %d: window %v, rows %v", written, w, rows)
				}
				written++
				return nil
			})
			if ok != tc.wantOK || !errors.Is(err, tc.wantErr) || written != tc.wantHours {
				t.Errorf("ok %v, err %v, %d hours written; want %v, %v, %d", ok, err, written, tc.wantOK, tc.wantErr, tc.wantHours)
			}
			if tc.writeFail >= 0 && read > tc.writeFail+aheadHours+1 {
				t.Errorf("the stream read %d hours after the write of hour %d failed", read, tc.writeFail)
			}
		})
	}
}
