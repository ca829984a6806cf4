package dashboards

//lint:file-ignore SA1019 the v1 dashboard schema imports into Grafana 11 and 12; dashboardv2 only into 12.

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
)

// Query is one query of a generated dashboard: a panel target or a variable.
type Query struct {
	Dashboard string
	Panel     string // panel title, or "variable NAME"
	Kind      string // "clickhouse" or "prometheus"
	Text      string // SQL or PromQL
}

// Queries lists every query of a dashboard, so tests can run each one against real services.
func Queries(d dashboard.Dashboard) []Query {
	var out []Query
	uid := ""
	if d.Uid != nil {
		uid = *d.Uid
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" && v.Query != nil && v.Query.String != nil {
			out = append(out, Query{Dashboard: uid, Panel: "variable " + v.Name, Kind: "clickhouse", Text: *v.Query.String})
		}
	}
	for _, p := range d.Panels {
		if p.Panel == nil {
			continue
		}
		title := ""
		if p.Panel.Title != nil {
			title = *p.Panel.Title
		}
		for _, t := range p.Panel.Targets {
			switch q := t.(type) {
			case ClickHouseQuery:
				out = append(out, Query{Dashboard: uid, Panel: title, Kind: "clickhouse", Text: q.RawSQL})
			case prometheus.Dataquery:
				out = append(out, Query{Dashboard: uid, Panel: title, Kind: "prometheus", Text: q.Expr})
			default:
				out = append(out, Query{Dashboard: uid, Panel: title, Kind: "unknown"})
			}
		}
	}
	return out
}
