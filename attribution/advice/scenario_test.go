package advice_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/advice"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/schemas/scenario"
)

func TestMain(m *testing.M) { localtest.Main(m) }

// scenarioMinMeasured is the minimum measured time the scenario checks advise with: every
// allocation of the public scenarios is billed for less than the hour they last, so with the
// default of 1 h each would be unknown.
const scenarioMinMeasured = 10 * time.Minute

// TestScenarios runs every public scenario through the simulator into ClickHouse and advises
// on its hour from the raw samples, samples_1s and samples_1m: each must give the expected
// advice (testdata/<scenario>.advice.csv, computed by hand from the scenario's workloads in
// testdata/README.md). Shapes, actions, memory, fractions and money must match exactly; the
// compute need within 0.001 (a vGPU's share of the GPU's time varies by a time slice a minute).
func TestScenarios(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("simulates an hour of a fleet per scenario")
	}
	dir := filepath.Join("..", "..", "schemas", "scenario", "testdata")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) < 4 {
		t.Fatalf("public scenarios: %v, %v", files, err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sc, err := scenario.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			want := readCSV(t, filepath.Join("testdata", name+".advice.csv"))
			conn := chtest.NewDatabase(t, nil)
			chtest.InsertScenario(t, conn, sc)
			chtest.RollUp(t, conn)
			for _, src := range []store.Samples{store.RawSamples, store.SecondRollup, store.MinuteRollup} {
				res, err := advice.Compute(context.Background(), conn, sc.Book, advice.Options{
					From: sc.Start, To: sc.End(), Samples: src, Headroom: advice.DefaultHeadroom,
					MinMeasured: scenarioMinMeasured, Now: sc.End().Add(time.Hour),
				})
				if err != nil {
					t.Fatalf("%s: %v", src, err)
				}
				var b bytes.Buffer
				if err := res.Write(&b, advice.ByAllocation, advice.CSV); err != nil {
					t.Fatal(err)
				}
				if os.Getenv("SLICEMETER_ADVICE_PRINT") != "" {
					t.Logf("%s:\n%s", src, b.String())
				}
				got, err := csv.NewReader(&b).ReadAll()
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range compare(got, want) {
					t.Errorf("%s: %s", src, d)
				}
			}
		})
	}
}

// compare lists how got differs from want (rows matched by position after the header).
func compare(got, want [][]string) []string {
	var d []string
	if len(got) != len(want) {
		return []string{"rows: " + strconv.Itoa(len(got)) + ", want " + strconv.Itoa(len(want))}
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			d = append(d, "row "+strconv.Itoa(i)+": "+strconv.Itoa(len(got[i]))+" columns, want "+strconv.Itoa(len(want[i])))
			continue
		}
		for j := range want[i] {
			g, w := got[i][j], want[i][j]
			if want[0][j] == "compute_need" && g != "" && w != "" {
				gf, err1 := strconv.ParseFloat(g, 64)
				wf, err2 := strconv.ParseFloat(w, 64)
				if err1 == nil && err2 == nil && math.Abs(gf-wf) <= 0.001 {
					continue
				}
			}
			if g != w {
				d = append(d, want[i][0]+" "+want[0][j]+": "+strconv.Quote(g)+", want "+strconv.Quote(w))
			}
		}
	}
	return d
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rows
}
