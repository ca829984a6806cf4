// Package focus is the FinOps FOCUS 1.2 export of the bill (README.md, "FOCUS export"): one
// Usage row per allocation per hour, built from the report's line items, and one Correction
// row per correction line of a closed period; written as CSV or Parquet, row by row, with the
// FOCUS metadata beside the file.
package focus

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/attribution/report"
)

// Version is the FOCUS version of the export.
const Version = "1.2"

// DateTime is FOCUS's date-time format: UTC, to the second.
const DateTime = "2006-01-02T15:04:05Z"

// PricingUnit is the unit of PricingQuantity: hours of a whole GPU, times the billed fraction.
const PricingUnit = "GPU-Hours"

// ConsumedUnit is the unit of ConsumedQuantity: the seconds the allocation was billed.
const ConsumedUnit = "Seconds"

// Issuer names who issues and provides the bill (InvoiceIssuerName, ProviderName,
// PublisherName).
type Issuer struct {
	InvoiceIssuer, Provider, Publisher string
}

// DefaultIssuer is the issuer unless configured.
var DefaultIssuer = Issuer{InvoiceIssuer: "slicemeter", Provider: "slicemeter", Publisher: "slicemeter"}

// Row is one FOCUS row. A nil pointer is a null cell. Field order is column order: the FOCUS
// columns in alphabetical order, then slicemeter's x_ columns.
type Row struct {
	AvailabilityZone           *string  `parquet:"AvailabilityZone,optional"`
	BilledCost                 float64  `parquet:"BilledCost"`
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
	ContractedCost             float64  `parquet:"ContractedCost"`
	ContractedUnitPrice        *float64 `parquet:"ContractedUnitPrice,optional"`
	EffectiveCost              float64  `parquet:"EffectiveCost"`
	InvoiceId                  string   `parquet:"InvoiceId"`
	InvoiceIssuerName          string   `parquet:"InvoiceIssuerName"`
	ListCost                   float64  `parquet:"ListCost"`
	ListUnitPrice              *float64 `parquet:"ListUnitPrice,optional"`
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
	XWasteCost        float64  `parquet:"x_WasteCost"`
	XOverheadCost     float64  `parquet:"x_OverheadCost"`
	XOverheadFraction *float64 `parquet:"x_OverheadFraction,optional"`
	XEfficiency       *float64 `parquet:"x_Efficiency,optional"`
	XJitterP99Ms      *float64 `parquet:"x_JitterP99Ms,optional"`
	XColdStartSeconds *float64 `parquet:"x_ColdStartSeconds,optional"`
	XColdStartBreach  *bool    `parquet:"x_ColdStartBreach,optional"`
	XUnmeteredSeconds float64  `parquet:"x_UnmeteredSeconds"`
	XCorrectedPeriod  *string  `parquet:"x_CorrectedPeriod,optional"`
}

// Columns are the CSV header: the Row's columns in order.
func Columns() []string {
	return []string{
		"AvailabilityZone", "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency",
		"BillingPeriodEnd", "BillingPeriodStart", "ChargeCategory", "ChargeClass", "ChargeDescription",
		"ChargeFrequency", "ChargePeriodEnd", "ChargePeriodStart", "CommitmentDiscountCategory",
		"CommitmentDiscountId", "CommitmentDiscountName", "CommitmentDiscountStatus", "CommitmentDiscountType",
		"ConsumedQuantity", "ConsumedUnit", "ContractedCost", "ContractedUnitPrice", "EffectiveCost",
		"InvoiceId", "InvoiceIssuerName", "ListCost", "ListUnitPrice", "PricingCategory", "PricingCurrency",
		"PricingQuantity", "PricingUnit", "ProviderName", "PublisherName", "RegionId", "RegionName",
		"ResourceId", "ResourceName", "ResourceType", "ServiceCategory", "ServiceName", "SkuId", "SkuMeter",
		"SkuPriceDetails", "SkuPriceId", "SubAccountId", "SubAccountName", "Tags",
		"x_AllocationId", "x_Tier", "x_BilledFraction", "x_WasteCost", "x_OverheadCost", "x_OverheadFraction",
		"x_Efficiency", "x_JitterP99Ms", "x_ColdStartSeconds", "x_ColdStartBreach", "x_UnmeteredSeconds",
		"x_CorrectedPeriod",
	}
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

// Usage is the FOCUS row of one line item (one allocation in one hour), billed in period p.
func Usage(a report.AllocationRow, p Period, issuer Issuer) Row {
	hours := a.Allocated.Hours()
	qty := a.Fraction * hours
	sku := a.Model
	if a.Profile != "" {
		sku += "/" + a.Profile
	}
	resource := a.Node + "/" + a.Instance
	r := base(a.Tenant, a.Tier, a.Currency, p, issuer)
	r.BilledCost, r.EffectiveCost, r.ContractedCost, r.ListCost = a.Cost, a.Cost, a.Cost, a.ListCost
	r.ChargeDescription = fmt.Sprintf("%s of %s on %s, %.6f of the GPU, %s", a.AllocationID, sku, resource, a.Fraction, a.Tier)
	r.ChargePeriodStart, r.ChargePeriodEnd = a.WindowStart.UTC().Format(DateTime), a.WindowEnd.UTC().Format(DateTime)
	r.ConsumedQuantity, r.ConsumedUnit = ptr(a.Allocated.Seconds()), ptr(ConsumedUnit)
	r.PricingQuantity, r.PricingUnit, r.PricingCategory = ptr(qty), ptr(PricingUnit), ptr("Standard")
	if qty > 0 {
		r.ListUnitPrice, r.ContractedUnitPrice = ptr(a.ListCost/qty), ptr(a.Cost/qty)
	} else {
		r.ListUnitPrice, r.ContractedUnitPrice = ptr(0.), ptr(0.)
	}
	r.ResourceId, r.ResourceName, r.ResourceType = ptr(resource), ptr(resource), ptr(resourceType(a.Kind))
	r.SkuId, r.SkuMeter = ptr(sku), ptr("GPU time")
	details, _ := json.Marshal(struct {
		GpuCount  int     `json:"GpuCount"`
		Profile   string  `json:"x_Profile,omitempty"`
		Fraction  float64 `json:"x_BilledFraction"`
		GPUModel  string  `json:"x_GpuModel"`
		PriceTier string  `json:"x_Tier"`
	}{1, a.Profile, a.Fraction, a.Model, a.Tier})
	r.SkuPriceDetails = ptr(string(details))
	// One price per SKU and tier (or tenant contract); the unit price says which.
	r.SkuPriceId = ptr(sku + "/" + a.Tier)
	tags, _ := json.Marshal(map[string]string{"slicemeter/allocation": a.AllocationID, "slicemeter/tier": a.Tier, "slicemeter/node": a.Node})
	r.Tags = ptr(string(tags))
	r.XAllocationID, r.XBilledFraction = ptr(a.AllocationID), ptr(a.Fraction)
	r.XWasteCost, r.XOverheadCost, r.XOverheadFraction = a.WasteCost, a.OverheadCost, ptr(a.Overhead)
	r.XEfficiency = a.Efficiency
	if a.JitterP99 != nil {
		r.XJitterP99Ms = ptr(float64(*a.JitterP99) / float64(time.Millisecond))
	}
	if a.ColdStart != nil {
		r.XColdStartSeconds = ptr(a.ColdStart.Seconds())
	}
	r.XColdStartBreach = ptr(a.ColdStartBreach)
	r.XUnmeteredSeconds = a.Unmetered.Seconds()
	return r
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
	return Row{
		BillingAccountId: tenant, BillingAccountName: tenant, BillingCurrency: currency,
		BillingPeriodStart: p.Start.UTC().Format(DateTime), BillingPeriodEnd: p.End.UTC().Format(DateTime),
		ChargeCategory: "Usage", ChargeFrequency: "Usage-Based",
		InvoiceId: InvoiceID(tenant, p), InvoiceIssuerName: issuer.InvoiceIssuer,
		ProviderName: issuer.Provider, PublisherName: issuer.Publisher, PricingCurrency: ptr(currency),
		ServiceCategory: "AI and Machine Learning", ServiceName: "GPU",
		SubAccountId: ptr(tenant + "/" + tier), SubAccountName: ptr(tier), XTier: tier,
	}
}

// resourceType names what was held: a MIG instance, a vGPU or a whole GPU.
func resourceType(kind string) string {
	switch kind {
	case "mig":
		return "MIG instance"
	case "vgpu":
		return "vGPU"
	}
	return "GPU"
}

// cells renders the row in Columns order; nil is an empty cell.
func (r Row) cells() []string {
	s := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	f := func(v float64) string {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return ""
		}
		// Always with a decimal point: a reader that infers types (pandas) takes a column of
		// whole numbers for integers, and FOCUS's are decimals.
		t := strconv.FormatFloat(v, 'f', -1, 64)
		if !strings.Contains(t, ".") {
			t += ".0"
		}
		return t
	}
	fp := func(p *float64) string {
		if p == nil {
			return ""
		}
		return f(*p)
	}
	b := ""
	if r.XColdStartBreach != nil {
		b = strconv.FormatBool(*r.XColdStartBreach)
	}
	return []string{
		s(r.AvailabilityZone), f(r.BilledCost), r.BillingAccountId, r.BillingAccountName, r.BillingCurrency,
		r.BillingPeriodEnd, r.BillingPeriodStart, r.ChargeCategory, s(r.ChargeClass), r.ChargeDescription,
		r.ChargeFrequency, r.ChargePeriodEnd, r.ChargePeriodStart, s(r.CommitmentDiscountCategory),
		s(r.CommitmentDiscountId), s(r.CommitmentDiscountName), s(r.CommitmentDiscountStatus), s(r.CommitmentDiscountType),
		fp(r.ConsumedQuantity), s(r.ConsumedUnit), f(r.ContractedCost), fp(r.ContractedUnitPrice), f(r.EffectiveCost),
		r.InvoiceId, r.InvoiceIssuerName, f(r.ListCost), fp(r.ListUnitPrice), s(r.PricingCategory), s(r.PricingCurrency),
		fp(r.PricingQuantity), s(r.PricingUnit), r.ProviderName, r.PublisherName, s(r.RegionId), s(r.RegionName),
		s(r.ResourceId), s(r.ResourceName), s(r.ResourceType), r.ServiceCategory, r.ServiceName, s(r.SkuId), s(r.SkuMeter),
		s(r.SkuPriceDetails), s(r.SkuPriceId), s(r.SubAccountId), s(r.SubAccountName), s(r.Tags),
		s(r.XAllocationID), r.XTier, fp(r.XBilledFraction), f(r.XWasteCost), f(r.XOverheadCost), fp(r.XOverheadFraction),
		fp(r.XEfficiency), fp(r.XJitterP99Ms), fp(r.XColdStartSeconds), b, f(r.XUnmeteredSeconds),
		s(r.XCorrectedPeriod),
	}
}
