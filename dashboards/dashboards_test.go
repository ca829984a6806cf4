package dashboards

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slicemeter/slicemeter/schemas/tables"
)

// The committed JSON is what the code generates: run `go generate ./dashboards` after a change.
func TestCommittedJSONIsGenerated(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("json/*.json")
	if len(files) != len(all) {
		t.Errorf("json/ holds %d files, the generator makes %d", len(files), len(all))
	}
	for _, g := range all {
		want, err := Marshal(g.Dashboard)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("json", g.File))
		if err != nil {
			t.Fatalf("%v (run go generate ./dashboards)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("json/%s differs from the generator's output: run go generate ./dashboards", g.File)
		}
	}
}

func TestEveryPanelQueriesAVariableDataSource(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	uids := map[string]bool{}
	for _, g := range all {
		d := g.Dashboard
		if uids[*d.Uid] {
			t.Errorf("uid %s used twice", *d.Uid)
		}
		uids[*d.Uid] = true
		if d.SchemaVersion < 39 {
			t.Errorf("%s: schemaVersion %v; Grafana 11 and 12 need 39 or newer", g.File, d.SchemaVersion)
		}
		for _, p := range d.Panels {
			if p.Panel == nil {
				continue
			}
			if len(p.Panel.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", g.File, *p.Panel.Title)
			}
			if p.Panel.Datasource == nil || !strings.HasPrefix(*p.Panel.Datasource.Uid, "${") {
				t.Errorf("%s: panel %q does not use a data-source variable", g.File, *p.Panel.Title)
			}
		}
		for _, q := range Queries(d) {
			if q.Kind == "unknown" || strings.TrimSpace(q.Text) == "" {
				t.Errorf("%s: %q has an empty or unknown query", g.File, q.Panel)
			}
		}
	}
}

// TestQueriesUseTheTableContracts: the dashboards compute what attribution computes, with the
// formulas and deduplicating reads of schemas/tables, not versions of their own.
func TestQueriesUseTheTableContracts(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	latestPass := tables.LatestPass(minutesWindow)
	for _, g := range all {
		for _, q := range Queries(g.Dashboard) {
			if q.Kind != "clickhouse" {
				continue
			}
			// Every efficiency is Σ efficiency_ns / Σ active_ns (not over metered time).
			if n := strings.Count(q.Text, "efficiency_ns"); n != strings.Count(q.Text, tables.Efficiency) {
				t.Errorf("%s: %q uses efficiency_ns other than in tables.Efficiency (%s):\n%s", g.File, q.Panel, tables.Efficiency, q.Text)
			}
			// Every mean SM activity of the rollups is Σ sm_active_sum / Σ active_samples (not
			// over all samples: unmeasured ones are not in sm_active_sum), read from the fullest
			// row under the column's name.
			rest := strings.ReplaceAll(q.Text, tables.SMActivity, "")
			rest = strings.ReplaceAll(rest, tables.Fullest("sm_active_sum")+" AS sm_active_sum", "")
			if strings.Contains(rest, "sm_active_sum") {
				t.Errorf("%s: %q uses sm_active_sum other than in tables.SMActivity (%s):\n%s", g.File, q.Panel, tables.SMActivity, q.Text)
			}
			// Every read of the stored minutes keeps only the latest pass: the outer read and
			// the one inside tables.LatestPass.
			if n := strings.Count(q.Text, "attribution_minutes"); n != 2*strings.Count(q.Text, latestPass) {
				t.Errorf("%s: %q reads attribution_minutes without tables.LatestPass:\n%s", g.File, q.Panel, q.Text)
			}
		}
	}
}

// TestEveryDataSourceVariableIsUsed: a dashboard declares a data-source variable only when a
// panel or another variable queries it; Grafana would otherwise ask the operator to pick a
// ClickHouse data source for a dashboard that never reads ClickHouse.
func TestEveryDataSourceVariableIsUsed(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range all {
		b, err := Marshal(g.Dashboard)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Templating struct {
				List []map[string]any `json:"list"`
			} `json:"templating"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		var full map[string]any
		if err := json.Unmarshal(b, &full); err != nil {
			t.Fatal(err)
		}
		var sources []string
		var others []map[string]any
		for _, v := range d.Templating.List {
			if v["type"] == "datasource" {
				sources = append(sources, v["name"].(string))
			} else {
				others = append(others, v)
			}
		}
		// What may refer to a data source: the panels and the variables that are not data
		// sources themselves.
		full["templating"] = map[string]any{"list": others}
		rest, err := json.Marshal(full)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range sources {
			if !strings.Contains(string(rest), `"${`+name+`}"`) {
				t.Errorf("%s declares the data-source variable %q and nothing queries it", g.File, name)
			}
		}
	}
}
