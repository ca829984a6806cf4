package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/report"
)

// hourlyQuery is minutesQuery per UTC hour: each allocation's sums over each hour's minutes,
// in hour order, so that a month is read as a stream of hours.
var hourlyQuery = strings.Replace(strings.TrimSuffix(minutesQuery, "GROUP BY tenant, allocation_id"),
	"\nSELECT tenant, allocation_id,", "\nSELECT toStartOfHour(minute) AS hour, tenant, allocation_id,", 1) +
	"GROUP BY hour, tenant, allocation_id\nORDER BY hour, tenant, allocation_id"

// HourlyLines calls each with the allocations' lines of every UTC hour of [from, to) (whole
// hours), in hour order, from the stored minutes: the lines FromMinutesLines gives for the
// hour, without its per-hour queries. Only one hour's lines are held at a time (each must not
// keep the slice). It fails, at the first hour not attributed in full, naming it.
func HourlyLines(ctx context.Context, conn Querier, from, to time.Time, each func(hour time.Time, lines []billing.Line) error) error {
	if !from.Before(to) || !from.Equal(from.Truncate(time.Hour)) || !to.Equal(to.Truncate(time.Hour)) {
		return fmt.Errorf("hourly lines of [%s, %s) from stored minutes: expected whole hours, start before end",
			from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano))
	}
	hour := from // the hour whose lines are being read
	var (
		lines   []billing.Line
		minutes uint64 // of hour, attributed (each has its __unallocated__ row)
	)
	// next passes every hour before the one starting at next to each; an hour without a
	// stored minute has no row at all, so each must have had its 60.
	next := func(at time.Time) error {
		for hour.Before(at) {
			if minutes != 60 {
				return fmt.Errorf("hour %s from stored minutes: %d of its 60 minutes are not attributed yet", hour.Format(time.RFC3339), 60-minutes)
			}
			if err := each(hour, lines); err != nil {
				return err
			}
			hour, lines, minutes = hour.Add(time.Hour), lines[:0], 0
		}
		return nil
	}
	for cf := from; cf.Before(to); cf = cf.Add(minutesChunk) {
		ct := minTime(cf.Add(minutesChunk), to)
		f, t := cf.Unix(), ct.Unix()
		err := queryEach(ctx, conn, hourlyQuery, []any{f, t, f, t}, func(scan func(...any) error) error {
			var at time.Time
			r, err := scanMinuteSums(scan, &at)
			if err != nil {
				return err
			}
			if err := next(at.UTC()); err != nil {
				return err
			}
			if r.tenant == report.Unallocated {
				minutes += r.minutes
				return nil
			}
			sum := r.first()
			sum.add(r.sums, r.waits, r.counts)
			sum.fraction = r.sums.fraction
			lines = append(lines, sum.line(r.tenant, r.id))
			return nil
		})
		if err != nil {
			return fmt.Errorf("read the stored minutes of [%s, %s) by hour: %w", cf.Format(time.RFC3339), ct.Format(time.RFC3339), err)
		}
	}
	return next(to)
}
