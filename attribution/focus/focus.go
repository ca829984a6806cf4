// Package focus is the FinOps FOCUS export of the bill (1.3 by default, 1.2 selectable) (attribution/README.md, "FOCUS export"): one
// Usage row per allocation per hour, built from the report's line items, and one Correction
// row per correction line of a closed period; written as CSV or Parquet, row by row, with the
// FOCUS metadata beside the file.
package focus

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/attribution/report"
)

// Version is a FOCUS version the export writes: its columns (Version.Columns) and metadata.
type Version string

// The FOCUS versions written. 1.3 adds the split-cost Allocated* columns (a GPU slice is a
// share of a physical GPU), ServiceProviderName and HostProviderName (1.3 deprecates
// ProviderName and PublisherName but keeps them mandatory, so both are written) and the
// metadata's Recency.
const (
	Focus12        Version = "1.2"
	Focus13        Version = "1.3"
	DefaultVersion         = Focus13
)

// Versions are the versions --focus.version and focus_version= accept.
func Versions() []string { return []string{string(Focus13), string(Focus12)} }

// ParseVersion is the version named s; empty is DefaultVersion.
func ParseVersion(s string) (Version, error) {
	switch Version(s) {
	case "":
		return DefaultVersion, nil
	case Focus12, Focus13:
		return Version(s), nil
	}
	return "", fmt.Errorf("FOCUS version %q: expected 1.3 or 1.2", s)
}

// has says whether the version has a column introduced in since (a Row field's since tag;
// empty: every version).
func (v Version) has(since string) bool { return since == "" || since <= string(v) }

// DateTime is FOCUS's date-time format: UTC, to the second.
const DateTime = "2006-01-02T15:04:05Z"

// PricingUnit is the unit of PricingQuantity: hours of a whole GPU, times the billed fraction.
const PricingUnit = "GPU-Hours"

// ServiceSubcategory is FOCUS 1.2's subcategory of the GPU time billed: of its category "AI and
// Machine Learning", the one for what is neither a platform, a model nor a bot (FOCUS
// lists GPU capacity, such as AWS's Capacity Blocks, there).
const ServiceSubcategory = "Other (AI and Machine Learning)"

// TagPrefix starts the key of every tag slicemeter writes (Tags): the metadata's
// ProviderTagPrefixes.
const TagPrefix = "slicemeter/"

// ConsumedUnit is the unit of ConsumedQuantity: the seconds the allocation was billed.
const ConsumedUnit = "Seconds"

// Issuer names who issues and provides the bill (InvoiceIssuerName, ProviderName,
// PublisherName, and in 1.3 ServiceProviderName and HostProviderName, which are Provider:
// slicemeter's operator runs the GPUs it sells, so it is its own host).
type Issuer struct {
	InvoiceIssuer, Provider, Publisher string
}

// DefaultIssuer is the issuer unless configured.
var DefaultIssuer = Issuer{InvoiceIssuer: "slicemeter", Provider: "slicemeter", Publisher: "slicemeter"}

// Row is one FOCUS row. A nil pointer is a null cell. Field order is column order: the FOCUS
// columns in alphabetical order, then slicemeter's x_ columns.
type Row struct {
	// The split-cost columns of FOCUS 1.3: the physical GPU the row's instance is a share of,
	// and how (attribution/README.md, "FOCUS export").
	AllocatedMethodDetails *string `parquet:"AllocatedMethodDetails,optional" since:"1.3"`
	AllocatedMethodId      *string `parquet:"AllocatedMethodId,optional" since:"1.3"`
	AllocatedResourceId    *string `parquet:"AllocatedResourceId,optional" since:"1.3"`
	AllocatedResourceName  *string `parquet:"AllocatedResourceName,optional" since:"1.3"`
	AllocatedTags          *string `parquet:"AllocatedTags,optional" since:"1.3"`

	AvailabilityZone           *string  `parquet:"AvailabilityZone,optional"`
	BilledCost                 float64  `parquet:"BilledCost" focus:"money"`
	BillingAccountId           string   `parquet:"BillingAccountId"`
	BillingAccountName         string   `parquet:"BillingAccountName"`
	BillingCurrency            string   `parquet:"BillingCurrency"`
	BillingPeriodEnd           string   `parquet:"BillingPeriodEnd"`
	BillingPeriodStart         string   `parquet:"BillingPeriodStart"`
	ChargeCategory             string   `parquet:"ChargeCategory"`
	ChargeClass                *string  `parquet:"ChargeClass,optional"`
	ChargeDescription          string   `parquet:"ChargeDescription"`
	ChargeFrequency            string   `parquet:"ChargeFrequency"`
	ChargePeriodEnd            string   `parquet:"ChargePeriodEnd"`
	ChargePeriodStart          string   `parquet:"ChargePeriodStart"`
	CommitmentDiscountCategory *string  `parquet:"CommitmentDiscountCategory,optional"`
	CommitmentDiscountId       *string  `parquet:"CommitmentDiscountId,optional"`
	CommitmentDiscountName     *string  `parquet:"CommitmentDiscountName,optional"`
	CommitmentDiscountStatus   *string  `parquet:"CommitmentDiscountStatus,optional"`
	CommitmentDiscountType     *string  `parquet:"CommitmentDiscountType,optional"`
	ConsumedQuantity           *float64 `parquet:"ConsumedQuantity,optional"`
	ConsumedUnit               *string  `parquet:"ConsumedUnit,optional"`
	ContractedCost             float64  `parquet:"ContractedCost" focus:"money"`
	ContractedUnitPrice        *float64 `parquet:"ContractedUnitPrice,optional" focus:"money"`
	EffectiveCost              float64  `parquet:"EffectiveCost" focus:"money"`
	HostProviderName           string   `parquet:"HostProviderName" since:"1.3"`
	InvoiceId                  string   `parquet:"InvoiceId"`
	InvoiceIssuerName          string   `parquet:"InvoiceIssuerName"`
	ListCost                   float64  `parquet:"ListCost" focus:"money"`
	ListUnitPrice              *float64 `parquet:"ListUnitPrice,optional" focus:"money"`
	PricingCategory            *string  `parquet:"PricingCategory,optional"`
	PricingCurrency            *string  `parquet:"PricingCurrency,optional"`
	PricingQuantity            *float64 `parquet:"PricingQuantity,optional"`
	PricingUnit                *string  `parquet:"PricingUnit,optional"`
	ProviderName               string   `parquet:"ProviderName"`
	PublisherName              string   `parquet:"PublisherName"`
	RegionId                   *string  `parquet:"RegionId,optional"`
	RegionName                 *string  `parquet:"RegionName,optional"`
	ResourceId                 *string  `parquet:"ResourceId,optional"`
	ResourceName               *string  `parquet:"ResourceName,optional"`
	ResourceType               *string  `parquet:"ResourceType,optional"`
	ServiceCategory            string   `parquet:"ServiceCategory"`
	ServiceName                string   `parquet:"ServiceName"`
	ServiceProviderName        string   `parquet:"ServiceProviderName" since:"1.3"`
	ServiceSubcategory         string   `parquet:"ServiceSubcategory"`
	SkuId                      *string  `parquet:"SkuId,optional"`
	SkuMeter                   *string  `parquet:"SkuMeter,optional"`
	SkuPriceDetails            *string  `parquet:"SkuPriceDetails,optional"`
	SkuPriceId                 *string  `parquet:"SkuPriceId,optional"`
	SubAccountId               *string  `parquet:"SubAccountId,optional"`
	SubAccountName             *string  `parquet:"SubAccountName,optional"`
	Tags                       *string  `parquet:"Tags,optional"`

	XAllocationID     *string  `parquet:"x_AllocationId,optional"`
	XTier             string   `parquet:"x_Tier"`
	XBilledFraction   *float64 `parquet:"x_BilledFraction,optional"`
	XWasteCost        float64  `parquet:"x_WasteCost" focus:"money"`
	XOverheadCost     float64  `parquet:"x_OverheadCost" focus:"money"`
	XOverheadFraction *float64 `parquet:"x_OverheadFraction,optional"`
	XEfficiency       *float64 `parquet:"x_Efficiency,optional"`
	XJitterP99Ms      *float64 `parquet:"x_JitterP99Ms,optional"`
	XColdStartSeconds *float64 `parquet:"x_ColdStartSeconds,optional"`
	XColdStartBreach  *bool    `parquet:"x_ColdStartBreach,optional"`
	XUnmeteredSeconds float64  `parquet:"x_UnmeteredSeconds"`
	XCorrectedPeriod  *string  `parquet:"x_CorrectedPeriod,optional"`
	// XEnergyJoules is the line's share of its GPU's energy, XMemoryEfficiency its memory used
	// / memory of the instance (attribution/README.md, "The tenant report"); null on a correction, and
	// the latter when no memory was measured.
	XEnergyJoules     *float64 `parquet:"x_EnergyJoules,optional"`
	XMemoryEfficiency *float64 `parquet:"x_MemoryEfficiency,optional"`
}

// Columns are the CSV header of the default version.
func Columns() []string { return DefaultVersion.Columns() }

// Columns are the version's CSV header: Row's columns in order, those of later versions left
// out.
func (v Version) Columns() []string {
	t := reflect.TypeFor[Row]()
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if v.has(f.Tag.Get("since")) {
			name, _, _ := strings.Cut(f.Tag.Get("parquet"), ",")
			out = append(out, name)
		}
	}
	return out
}

// Period is a billing period: a calendar month of the price book's time zone.
type Period struct {
	Start, End time.Time
	Name       string // YYYY-MM
}

// PeriodOf is the billing period holding t, months of loc.
func PeriodOf(t time.Time, loc *time.Location) Period {
	start := report.MonthStart(t, loc, 0)
	return Period{Start: start, End: report.MonthStart(t, loc, 1), Name: start.In(loc).Format("2006-01")}
}

// InvoiceID is the invoice of a tenant's bill of a period: one per tenant and month.
func InvoiceID(tenant string, p Period) string { return tenant + "/" + p.Name }

func ptr[T any](v T) *T { return &v }

// usageCells hold what a Usage row's optional cells point to: one allocation per row instead
// of one per cell (an export makes a row per allocation and hour).
type usageCells struct {
	consumedUnit, pricingUnit, pricingCategory, pricingCurrency, resourceType, skuMeter                string
	resource, resourceName, sku, details, skuPriceID, tags, subAccountID, subAccountName, allocationID string
	consumed, qty, listUnit, contractedUnit, fraction, overhead, jitter, coldStart, energy             float64
	breach                                                                                             bool
	allocMethod, allocDetails, allocResource, allocTags                                                string
}

// Usage is the FOCUS row of one line item (one allocation in one hour), billed in period p.
// Its text cells are built in one buffer and cut from one string, for the same reason.
func Usage(a report.AllocationRow, p Period, issuer Issuer) Row {
	c := &usageCells{consumedUnit: ConsumedUnit, pricingUnit: PricingUnit, pricingCategory: "Standard", pricingCurrency: a.Currency,
		resourceType: resourceType(a.Kind), skuMeter: "GPU time", subAccountName: a.Tier, allocationID: a.AllocationID,
		consumed: a.Allocated.Seconds(), qty: a.Fraction * a.Allocated.Hours(), fraction: a.Fraction, overhead: a.Overhead,
		breach: a.ColdStartBreach}
	if c.qty > 0 {
		c.listUnit, c.contractedUnit = a.ListCost/c.qty, a.Cost/c.qty
	}
	chargeStart, chargeEnd := chargePeriod(a)
	b := make([]byte, 0, 640)
	var at [12]int // where each text cell ends in b
	b = append(b, a.Model...)
	if a.Profile != "" {
		b = append(append(b, '/'), a.Profile...)
	}
	at[0] = len(b) // sku
	b = append(append(append(b, a.Node...), '/'), a.Instance...)
	at[1] = len(b) // resource
	b = append(append(b, a.AllocationID...), " of "...)
	b = append(append(b, b[:at[0]]...), " on "...)
	b = append(append(b, b[at[0]:at[1]]...), ", "...)
	b = append(strconv.AppendFloat(b, a.Fraction, 'f', 6, 64), " of the GPU, "...)
	b = append(b, a.Tier...)
	at[2] = len(b) // description
	b = append(b, `{"GpuCount":1`...)
	if a.Profile != "" {
		b = appendJSONString(append(b, `,"x_Profile":`...), a.Profile)
	}
	b = appendJSONFloat(append(b, `,"x_BilledFraction":`...), a.Fraction)
	b = appendJSONString(append(b, `,"x_GpuModel":`...), a.Model)
	b = append(appendJSONString(append(b, `,"x_Tier":`...), a.Tier), '}')
	at[3] = len(b) // details
	// One price per SKU and tier (or tenant contract); the unit price says which.
	b = append(append(append(b, b[:at[0]]...), '/'), a.Tier...)
	at[4] = len(b) // SKU price
	// The keys in encoding/json's order (sorted), as a map would be written.
	b = appendJSONString(append(b, `{"slicemeter/allocation":`...), a.AllocationID)
	b = appendJSONString(append(b, `,"slicemeter/node":`...), a.Node)
	b = append(appendJSONString(append(b, `,"slicemeter/tier":`...), a.Tier), '}')
	at[5] = len(b) // tags
	b = append(append(append(b, a.Tenant...), '/'), a.Tier...)
	at[6] = len(b) // sub-account
	b = append(append(append(b, a.Tenant...), '/'), p.Name...)
	at[7] = len(b) // invoice
	b = appendDateTime(b, p.Start)
	at[8] = len(b)
	b = appendDateTime(b, p.End)
	at[9] = len(b)
	b = appendDateTime(b, chargeStart)
	at[10] = len(b)
	b = appendDateTime(b, chargeEnd)
	at[11] = len(b)
	s := string(b)
	cut := func(i int) string {
		if i == 0 {
			return s[:at[0]]
		}
		return s[at[i-1]:at[i]]
	}
	c.sku, c.resource, c.details, c.skuPriceID, c.tags, c.subAccountID = cut(0), cut(1), cut(3), cut(4), cut(5), cut(6)
	c.resourceName = c.resource
	r := constant(a.Tenant, a.Tier, a.Currency, issuer)
	r.BillingPeriodStart, r.BillingPeriodEnd, r.InvoiceId = cut(8), cut(9), cut(7)
	r.PricingCurrency, r.SubAccountId, r.SubAccountName = &c.pricingCurrency, &c.subAccountID, &c.subAccountName
	r.BilledCost, r.EffectiveCost, r.ContractedCost, r.ListCost = a.Cost, a.Cost, a.Cost, a.ListCost
	r.ChargeDescription = cut(2)
	r.ChargePeriodStart, r.ChargePeriodEnd = cut(10), cut(11)
	r.ConsumedQuantity, r.ConsumedUnit = &c.consumed, &c.consumedUnit
	r.PricingQuantity, r.PricingUnit, r.PricingCategory = &c.qty, &c.pricingUnit, &c.pricingCategory
	r.ListUnitPrice, r.ContractedUnitPrice = &c.listUnit, &c.contractedUnit
	r.ResourceId, r.ResourceName, r.ResourceType = &c.resource, &c.resourceName, &c.resourceType
	r.SkuId, r.SkuMeter, r.SkuPriceDetails, r.SkuPriceId = &c.sku, &c.skuMeter, &c.details, &c.skuPriceID
	r.Tags = &c.tags
	r.XAllocationID, r.XBilledFraction = &c.allocationID, &c.fraction
	r.XWasteCost, r.XOverheadCost, r.XOverheadFraction = a.WasteCost, a.OverheadCost, &c.overhead
	r.XEfficiency = a.Efficiency
	if a.JitterP99 != nil {
		c.jitter = float64(*a.JitterP99) / float64(time.Millisecond)
		r.XJitterP99Ms = &c.jitter
	}
	if a.ColdStart != nil {
		c.coldStart = a.ColdStart.Seconds()
		r.XColdStartSeconds = &c.coldStart
	}
	r.XColdStartBreach = &c.breach
	r.XUnmeteredSeconds = a.Unmetered.Seconds()
	c.energy = a.EnergyJ
	r.XEnergyJoules, r.XMemoryEfficiency = &c.energy, a.MemoryEfficiency
	allocated(c, a)
	r.AllocatedMethodId, r.AllocatedMethodDetails = &c.allocMethod, &c.allocDetails
	r.AllocatedResourceId, r.AllocatedResourceName, r.AllocatedTags = &c.allocResource, &c.allocResource, &c.allocTags
	return r
}

// allocated sets the FOCUS 1.3 split-cost cells of a Usage row: the row's instance is a share
// of one physical GPU (AllocatedResourceId, node/gpu), split by the rule of its kind
// (AllocatedMethodId), with one element whose AllocatedRatio is the billed fraction and whose
// usage is the hours the share was held, so that AllocatedRatio × UsageQuantity is the row's
// PricingQuantity (GPU-Hours).
func allocated(c *usageCells, a report.AllocationRow) {
	c.allocMethod = AllocatedMethod(a.Kind)
	gpu, _, _ := strings.Cut(a.Instance, "/")
	b := make([]byte, 0, 256)
	b = append(append(append(b, a.Node...), '/'), gpu...)
	n := len(b)
	b = appendJSONFloat(append(b, `{"Elements":[{"AllocatedRatio":`...), a.Fraction)
	b = appendJSONFloat(append(b, `,"UsageQuantity":`...), a.Allocated.Hours())
	b = append(b, `,"UsageUnit":"Hours"}]}`...)
	d := len(b)
	// The GPU's own tags, none of the row's Tags (FOCUS 1.3: AllocatedTags "MUST NOT include
	// resource tags already present in Tags").
	b = appendJSONString(append(b, `{"slicemeter/gpu-model":`...), a.Model)
	b = append(appendJSONString(append(b, `,"slicemeter/instance-kind":`...), a.Kind), '}')
	s := string(b)
	c.allocResource, c.allocDetails, c.allocTags = s[:n], s[n:d], s[d:]
}

// The AllocatedMethodId of each kind of instance: the rule that gives its billed fraction of
// the physical GPU (attribution/README.md, "Definitions").
const (
	MethodMIG   = "mig-compute-slices"
	MethodVGPU  = "vgpu-framebuffer"
	MethodShare = "share-replicas"
	MethodWhole = "whole"
)

// AllocatedMethod is the AllocatedMethodId of an instance of the kind.
func AllocatedMethod(kind string) string {
	switch kind {
	case "mig":
		return MethodMIG
	case "vgpu":
		return MethodVGPU
	case "share":
		return MethodShare
	}
	return MethodWhole
}

// chargePeriod is the part of the line item's window that it bills, in whole seconds: billing
// is one interval [started_at, ended_at), so an allocation billed for less than its window
// starts at the later of the window's start and its own, and ends its billed time after that.
// Seconds round outwards (within the window) so that the period holds what it bills.
func chargePeriod(a report.AllocationRow) (start, end time.Time) {
	start, end = a.WindowStart, a.WindowEnd
	if a.Allocated <= 0 || a.Allocated >= end.Sub(start) {
		return start, end
	}
	if a.Started.After(start) {
		start = a.Started
	}
	if e := start.Add(a.Allocated); e.Before(end) {
		end = e
	}
	start = start.Truncate(time.Second)
	if c := end.Truncate(time.Second); c.Before(end) {
		end = minTime(c.Add(time.Second), a.WindowEnd)
	}
	if !start.Before(end.Truncate(time.Second)) { // within one second of a window's fractional end
		return a.WindowStart, a.WindowEnd
	}
	return start, end
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Correction is the FOCUS row of a correction line (report.Report.Corrections) of the period
// p that bills it: ChargeClass Correction, the charge period the corrected period's (given by
// corrected), the amounts the differences. Quantities and unit prices are null: a correction
// of a tenant and tier sums many SKUs.
func Correction(c report.Row, corrected, p Period, issuer Issuer) Row {
	tier := c.Tier
	r := base(c.Tenant, tier, c.Currency, p, issuer)
	r.ChargeClass = ptr("Correction")
	r.BilledCost, r.EffectiveCost, r.ContractedCost, r.ListCost = c.Cost, c.Cost, c.Cost, c.ListCost
	r.ChargeDescription = fmt.Sprintf("correction of %s's bill of %s, recomputed from data that arrived after it was closed", c.Tenant, corrected.Name)
	r.ChargePeriodStart, r.ChargePeriodEnd = corrected.Start.UTC().Format(DateTime), corrected.End.UTC().Format(DateTime)
	r.PricingCategory = ptr("Standard")
	r.SubAccountId, r.SubAccountName = ptr(c.Tenant), ptr(c.Tenant)
	r.XWasteCost, r.XOverheadCost, r.XUnmeteredSeconds = c.WasteCost, c.OverheadCost, c.Unmetered.Seconds()
	r.XCorrectedPeriod = ptr(corrected.Name)
	return r
}

// base is what every row of a tenant's bill of a period has.
func base(tenant, tier, currency string, p Period, issuer Issuer) Row {
	r := constant(tenant, tier, currency, issuer)
	r.BillingPeriodStart, r.BillingPeriodEnd = p.Start.UTC().Format(DateTime), p.End.UTC().Format(DateTime)
	r.InvoiceId, r.PricingCurrency = InvoiceID(tenant, p), ptr(currency)
	r.SubAccountId, r.SubAccountName = ptr(tenant+"/"+tier), ptr(tier)
	return r
}

// constant is base without the cells it must allocate.
func constant(tenant, tier, currency string, issuer Issuer) Row {
	return Row{
		BillingAccountId: tenant, BillingAccountName: tenant, BillingCurrency: currency,
		ChargeCategory: "Usage", ChargeFrequency: "Usage-Based", InvoiceIssuerName: issuer.InvoiceIssuer,
		ProviderName: issuer.Provider, PublisherName: issuer.Publisher, ServiceProviderName: issuer.Provider, HostProviderName: issuer.Provider,
		ServiceCategory: "AI and Machine Learning", ServiceName: "GPU", ServiceSubcategory: ServiceSubcategory, XTier: tier,
	}
}

// resourceType names what was held: a MIG instance, a vGPU, a time-sliced or MPS replica of
// a GPU (kind share), or a whole GPU.
func resourceType(kind string) string {
	switch kind {
	case "mig":
		return "MIG instance"
	case "vgpu":
		return "vGPU"
	case "share":
		return "GPU replica"
	}
	return "GPU"
}

// cells renders the row in the version's Columns order; nil is an empty cell.
func (r *Row) cells(v Version) []string {
	c := textCells(make([]string, 0, 70))
	r.emit(&c, v)
	return c
}

// A cellSink receives a row's cells in Columns order (emit): the CSV writer appends them to
// its line, cells makes them strings.
type cellSink interface {
	text(s string)
	optText(s *string) // nil: null
	num(v float64)
	optNum(v *float64) // nil: null
	optBool(v *bool)   // nil: null
	money(v float64)   // an amount: a decimal at MoneyScale
	optMoney(v *float64)
}

// emit passes the row's cells to c in the version's Columns order.
func (r *Row) emit(c cellSink, v Version) {
	v13 := v.has(string(Focus13))
	if v13 {
		c.optText(r.AllocatedMethodDetails)
		c.optText(r.AllocatedMethodId)
		c.optText(r.AllocatedResourceId)
		c.optText(r.AllocatedResourceName)
		c.optText(r.AllocatedTags)
	}
	c.optText(r.AvailabilityZone)
	c.money(r.BilledCost)
	c.text(r.BillingAccountId)
	c.text(r.BillingAccountName)
	c.text(r.BillingCurrency)
	c.text(r.BillingPeriodEnd)
	c.text(r.BillingPeriodStart)
	c.text(r.ChargeCategory)
	c.optText(r.ChargeClass)
	c.text(r.ChargeDescription)
	c.text(r.ChargeFrequency)
	c.text(r.ChargePeriodEnd)
	c.text(r.ChargePeriodStart)
	c.optText(r.CommitmentDiscountCategory)
	c.optText(r.CommitmentDiscountId)
	c.optText(r.CommitmentDiscountName)
	c.optText(r.CommitmentDiscountStatus)
	c.optText(r.CommitmentDiscountType)
	c.optNum(r.ConsumedQuantity)
	c.optText(r.ConsumedUnit)
	c.money(r.ContractedCost)
	c.optMoney(r.ContractedUnitPrice)
	c.money(r.EffectiveCost)
	if v13 {
		c.text(r.HostProviderName)
	}
	c.text(r.InvoiceId)
	c.text(r.InvoiceIssuerName)
	c.money(r.ListCost)
	c.optMoney(r.ListUnitPrice)
	c.optText(r.PricingCategory)
	c.optText(r.PricingCurrency)
	c.optNum(r.PricingQuantity)
	c.optText(r.PricingUnit)
	c.text(r.ProviderName)
	c.text(r.PublisherName)
	c.optText(r.RegionId)
	c.optText(r.RegionName)
	c.optText(r.ResourceId)
	c.optText(r.ResourceName)
	c.optText(r.ResourceType)
	c.text(r.ServiceCategory)
	c.text(r.ServiceName)
	if v13 {
		c.text(r.ServiceProviderName)
	}
	c.text(r.ServiceSubcategory)
	c.optText(r.SkuId)
	c.optText(r.SkuMeter)
	c.optText(r.SkuPriceDetails)
	c.optText(r.SkuPriceId)
	c.optText(r.SubAccountId)
	c.optText(r.SubAccountName)
	c.optText(r.Tags)
	c.optText(r.XAllocationID)
	c.text(r.XTier)
	c.optNum(r.XBilledFraction)
	c.money(r.XWasteCost)
	c.money(r.XOverheadCost)
	c.optNum(r.XOverheadFraction)
	c.optNum(r.XEfficiency)
	c.optNum(r.XJitterP99Ms)
	c.optNum(r.XColdStartSeconds)
	c.optBool(r.XColdStartBreach)
	c.num(r.XUnmeteredSeconds)
	c.optText(r.XCorrectedPeriod)
	c.optNum(r.XEnergyJoules)
	c.optNum(r.XMemoryEfficiency)
}
