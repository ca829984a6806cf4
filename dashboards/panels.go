// Package dashboards generates slicemeter's Grafana dashboards as code with
// grafana-foundation-sdk. `go generate ./dashboards` writes them to dashboards/json; a test fails
// when the committed JSON differs from what the code generates.
package dashboards

//lint:file-ignore SA1019 the v1 dashboard schema imports into Grafana 11 and 12; dashboardv2 only into 12.

//go:generate go run ./gen

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// Data sources are dashboard variables, so one dashboard serves every environment.
func promDS() *common.DataSourceRef {
	return &common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${prometheus}")}
}

func clickhouseDS() *common.DataSourceRef {
	return &common.DataSourceRef{Type: cog.ToPtr(ClickHousePluginID), Uid: cog.ToPtr("${clickhouse}")}
}

// dataSources says which data-source variables a dashboard declares: only those its panels and
// variables query, so that Grafana asks the operator to pick nothing the dashboard never reads.
type dataSources int

const (
	prometheusOnly dataSources = iota + 1
	clickHouseOnly
	prometheusAndClickHouse
)

func datasourceVariables(ds dataSources) []cog.Builder[dashboard.VariableModel] {
	var vars []cog.Builder[dashboard.VariableModel]
	if ds != clickHouseOnly {
		vars = append(vars, dashboard.NewDatasourceVariableBuilder("prometheus").Label("Prometheus").Type("prometheus"))
	}
	if ds != prometheusOnly {
		vars = append(vars, dashboard.NewDatasourceVariableBuilder("clickhouse").Label("ClickHouse").Type(ClickHousePluginID))
	}
	return vars
}

// clickhouseVariable is a variable whose values come from a ClickHouse query.
func clickhouseVariable(name, label, sql string) cog.Builder[dashboard.VariableModel] {
	return dashboard.NewQueryVariableBuilder(name).Label(label).
		Datasource(*clickhouseDS()).
		Query(dashboard.StringOrMap{String: cog.ToPtr(sql)}).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged)
}

// promQuery is one PromQL target with its legend.
type promQuery struct{ expr, legend string }

func promTargets(queries []promQuery) []cog.Builder[variants.Dataquery] {
	out := make([]cog.Builder[variants.Dataquery], 0, len(queries))
	for i, q := range queries {
		out = append(out, prometheus.NewDataqueryBuilder().
			Datasource(*promDS()).Expr(q.expr).LegendFormat(q.legend).RefId(refID(i)).Range())
	}
	return out
}

func refID(i int) string { return string(rune('A' + i)) }

func promSeries(title, unit string, queries ...promQuery) *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().Title(title).Unit(unit).Datasource(*promDS()).
		Targets(promTargets(queries)).Height(8).Span(12)
}

func promStat(title, unit string, queries ...promQuery) *stat.PanelBuilder {
	b := stat.NewPanelBuilder().Title(title).Unit(unit).Datasource(*promDS()).Height(5).Span(6)
	for i, q := range queries {
		b.WithTarget(prometheus.NewDataqueryBuilder().Datasource(*promDS()).Expr(q.expr).LegendFormat(q.legend).RefId(refID(i)).Instant())
	}
	return b
}

func promTable(title string, queries ...promQuery) *table.PanelBuilder {
	b := table.NewPanelBuilder().Title(title).Datasource(*promDS()).Height(8).Span(12)
	for i, q := range queries {
		b.WithTarget(prometheus.NewDataqueryBuilder().Datasource(*promDS()).Expr(q.expr).LegendFormat(q.legend).
			RefId(refID(i)).Instant().Format(prometheus.PromQueryFormatTable))
	}
	return b
}

func chSeries(title, unit, sql string) *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().Title(title).Unit(unit).Datasource(*clickhouseDS()).
		WithTarget(SQL(FormatTimeSeries, sql).RefId("A")).Height(8).Span(12)
}

func chStat(title, unit, sql string) *stat.PanelBuilder {
	return stat.NewPanelBuilder().Title(title).Unit(unit).Datasource(*clickhouseDS()).
		WithTarget(SQL(FormatTable, sql).RefId("A")).Height(5).Span(6)
}

func chTable(title, sql string) *table.PanelBuilder {
	return table.NewPanelBuilder().Title(title).Datasource(*clickhouseDS()).
		WithTarget(SQL(FormatTable, sql).RefId("A")).Height(8).Span(12)
}

// subSecond converts the query's millisecond "time_ms" column into Grafana's time type: ClickHouse
// 18.16 has no DateTime64, and the drill-down keeps every sample.
func subSecond(b *timeseries.PanelBuilder) *timeseries.PanelBuilder {
	return b.WithTransformation(dashboard.DataTransformerConfig{
		Id: "convertFieldType",
		Options: map[string]any{
			"conversions": []map[string]any{{"targetField": "time_ms", "destinationType": "time"}},
		},
	})
}

func newDashboard(uid, title, description string, ds dataSources, tags ...string) *dashboard.DashboardBuilder {
	return dashboard.NewDashboardBuilder(title).Uid(uid).Description(description).
		Tags(append([]string{"slicemeter"}, tags...)).
		Refresh("1m").Time("now-6h", "now").Timezone("utc").
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Variables(datasourceVariables(ds))
}
