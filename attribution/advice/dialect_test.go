package advice_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/advice"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/schemas/scenario"
)

// TestCurrentClickHouseDialect runs every query advice.Compute sends, from each sample source
// (as sent, values bound), through chDB (current ClickHouse) after the migrations: the SQL
// must run there as on 18.16, where the queries ran first.
func TestCurrentClickHouseDialect(t *testing.T) {
	t.Parallel()
	localtest.SkipShort(t, "chDB (python)")
	sc, err := scenario.Load(filepath.Join("..", "..", "schemas", "scenario", "testdata", "mig-basic.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sc.Duration = 3 * time.Minute // a few minutes of every kind of row: partial and whole minutes
	recorder := &chtest.QueryRecorder{}
	conn := chtest.NewDatabase(t, slog.New(recorder))
	chtest.InsertScenario(t, conn, sc)
	chtest.RollUp(t, conn)
	before := len(recorder.All())
	for _, src := range []store.Samples{store.RawSamples, store.SecondRollup, store.MinuteRollup} {
		res, err := advice.Compute(context.Background(), conn, sc.Book, advice.Options{From: sc.Start, To: sc.End(), Samples: src,
			Headroom: advice.DefaultHeadroom, MinMeasured: time.Minute, Now: sc.End().Add(time.Hour)})
		if err != nil || len(res.Rows) != 2 {
			t.Fatalf("%s: %d rows, %v; want the 2 allocations of the first minutes", src, len(res.Rows), err)
		}
	}
	// A tenant's view keeps its own allocations only.
	res, err := advice.Compute(context.Background(), conn, sc.Book, advice.Options{From: sc.Start, To: sc.End(), Samples: store.MinuteRollup,
		Headroom: advice.DefaultHeadroom, MinMeasured: time.Minute, Now: sc.End().Add(time.Hour), Tenants: []string{"gamma"}})
	if err != nil || len(res.Rows) != 1 || res.Rows[0].Tenant != "gamma" {
		t.Fatalf("gamma's view: %+v, %v; want its one allocation", res.Rows, err)
	}
	localtest.CheckQueriesWithChDB(t, "advice.sql", recorder.QueriesSince(before))
}
