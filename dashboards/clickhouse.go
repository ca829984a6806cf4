package dashboards

import (
	"encoding/json"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
)

// ClickHousePluginID is the Grafana ClickHouse data-source plugin.
const ClickHousePluginID = "grafana-clickhouse-datasource"

// ClickHouse query formats of the plugin (its Format enum).
const (
	FormatTimeSeries = 0
	FormatTable      = 1
)

// ClickHouseQuery is the plugin's SQL-editor query, the one query type the SDK lacks.
type ClickHouseQuery struct {
	RefId      string                `json:"refId"`
	Hide       *bool                 `json:"hide,omitempty"`
	Datasource *common.DataSourceRef `json:"datasource,omitempty"`
	EditorType string                `json:"editorType"`
	QueryType  string                `json:"queryType"`
	Format     int                   `json:"format"`
	RawSQL     string                `json:"rawSql"`
}

var _ variants.Dataquery = ClickHouseQuery{}

// ImplementsDataqueryVariant marks ClickHouseQuery as a data query for cog.
func (ClickHouseQuery) ImplementsDataqueryVariant() {}

// DataqueryType names the plugin.
func (ClickHouseQuery) DataqueryType() string { return ClickHousePluginID }

// Validate accepts every query: the tests run each one against real ClickHouse instead.
func (ClickHouseQuery) Validate() error { return nil }

// Equals compares two queries field by field.
func (q ClickHouseQuery) Equals(other variants.Dataquery) bool {
	o, ok := other.(ClickHouseQuery)
	if !ok {
		return false
	}
	a, _ := json.Marshal(q)
	b, _ := json.Marshal(o)
	return string(a) == string(b)
}

// ClickHouseVariantConfig lets cog unmarshal dashboards holding ClickHouse queries.
func ClickHouseVariantConfig() variants.DataqueryConfig {
	return variants.DataqueryConfig{
		Identifier: ClickHousePluginID,
		DataqueryUnmarshaler: func(raw []byte) (variants.Dataquery, error) {
			var q ClickHouseQuery
			err := json.Unmarshal(raw, &q)
			return q, err
		},
	}
}

// ClickHouseQueryBuilder builds a ClickHouseQuery.
type ClickHouseQueryBuilder struct {
	q ClickHouseQuery
}

var _ cog.Builder[variants.Dataquery] = (*ClickHouseQueryBuilder)(nil)

// SQL starts a query in the plugin's SQL editor on the dashboard's ClickHouse data source.
func SQL(format int, sql string) *ClickHouseQueryBuilder {
	queryType := "table"
	if format == FormatTimeSeries {
		queryType = "timeseries"
	}
	return &ClickHouseQueryBuilder{q: ClickHouseQuery{
		EditorType: "sql", QueryType: queryType, Format: format, RawSQL: sql, Datasource: clickhouseDS(),
	}}
}

// RefId sets the query's reference id within its panel.
func (b *ClickHouseQueryBuilder) RefId(id string) *ClickHouseQueryBuilder {
	b.q.RefId = id
	return b
}

// Build returns the query.
func (b *ClickHouseQueryBuilder) Build() (variants.Dataquery, error) { return b.q, nil }
