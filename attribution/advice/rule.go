// Package advice is right-sizing (README.md, "Right-sizing (`slicemeter advise`)"): from what
// an allocation needed (the p95 of its per-minute activity in whole-GPU units, its memory's
// high-water mark), the smallest shape its GPU model offers that holds it with headroom, and
// the money the move saves. This file is the rule alone, without I/O: the shapes, the choice
// and the savings.
package advice

import (
	"cmp"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"time"

	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/schemas/hardware"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// MaxShareWays is the most ways a shared GPU is split into as a candidate.
const MaxShareWays = 16

// Shape is a way of holding part of a GPU: a whole GPU, a MIG profile, a vGPU profile or a
// share of a GPU split N ways.
type Shape struct {
	Name string // "gpu", the MIG or vGPU profile, or "share-N"
	Kind string // gpu, mig, vgpu or share (slicemeterpb.Kind.Label)
	// Fraction is the billed fraction, exact (MIG slices/7, vGPU fb / GPU fb, share 1/N): the
	// savings are money and must not inherit a float's error.
	Fraction *big.Rat
	// Capacity is the compute the shape delivers, in whole-GPU units (MIG: its SMs over the
	// GPU's; vGPU: its share of the GPU's time, fb / GPU fb; share 1/N; whole GPU 1).
	Capacity    float64
	MemoryBytes uint64
}

// FractionFloat is the billed fraction as a float, for display and ratios.
func (s Shape) FractionFloat() float64 {
	f, _ := s.Fraction.Float64()
	return f
}

// Unit is what one unit of an instance's sm_active is in whole-GPU units: a whole GPU's
// activity is the GPU's, a MIG instance's is of its own SMs (SMs / GPU SMs of them), a vGPU's
// and a share's are already a share of the GPU's time.
func Unit(in pricebook.Instance) float64 {
	if in.Kind == pb.Kind_KIND_MIG.Label() && in.GPUSMCount > 0 {
		return float64(in.SMCount) / float64(in.GPUSMCount)
	}
	return 1
}

// Current is the shape an instance is, as its samples describe it.
func Current(in pricebook.Instance) (Shape, error) {
	fail := func(err error) (Shape, error) {
		return Shape{}, fmt.Errorf("shape of %s instance %q on %s: %w", in.Kind, in.Profile, in.Model, err)
	}
	switch in.Kind {
	case pb.Kind_KIND_GPU.Label():
		return whole(in.GPUMemTotalBytes, in.MemTotalBytes), nil
	case pb.Kind_KIND_MIG.Label():
		if in.ComputeSlices < 1 || in.ComputeSlices > hardware.MaxComputeSlices || in.GPUSMCount == 0 || in.SMCount > in.GPUSMCount {
			return fail(fmt.Errorf("%d compute slices, %d of %d SMs: expected 1 to %d slices and at most the GPU's SMs",
				in.ComputeSlices, in.SMCount, in.GPUSMCount, hardware.MaxComputeSlices))
		}
		return Shape{Name: in.Profile, Kind: in.Kind, Fraction: big.NewRat(int64(in.ComputeSlices), hardware.MaxComputeSlices),
			Capacity: float64(in.SMCount) / float64(in.GPUSMCount), MemoryBytes: in.MemTotalBytes}, nil
	case pb.Kind_KIND_VGPU.Label():
		if in.MemTotalBytes == 0 || in.GPUMemTotalBytes == 0 || in.MemTotalBytes > in.GPUMemTotalBytes {
			return fail(fmt.Errorf("framebuffer %d of GPU framebuffer %d bytes: expected 0 < profile ≤ GPU", in.MemTotalBytes, in.GPUMemTotalBytes))
		}
		return vgpu(in.Profile, in.MemTotalBytes, in.GPUMemTotalBytes), nil
	case pb.Kind_KIND_SHARE.Label():
		if in.ShareReplicas < 1 {
			return fail(fmt.Errorf("%d replicas: expected at least 1", in.ShareReplicas))
		}
		return share(int64(in.ShareReplicas), in.GPUMemTotalBytes), nil
	}
	return fail(fmt.Errorf("kind %q: expected gpu, mig, vgpu or share", in.Kind))
}

func whole(gpuMem, instanceMem uint64) Shape {
	if gpuMem == 0 {
		gpuMem = instanceMem
	}
	return Shape{Name: "gpu", Kind: pb.Kind_KIND_GPU.Label(), Fraction: big.NewRat(1, 1), Capacity: 1, MemoryBytes: gpuMem}
}

func vgpu(name string, fb, gpuFB uint64) Shape {
	f := new(big.Rat).SetFrac(new(big.Int).SetUint64(fb), new(big.Int).SetUint64(gpuFB))
	c, _ := f.Float64()
	return Shape{Name: name, Kind: pb.Kind_KIND_VGPU.Label(), Fraction: f, Capacity: c, MemoryBytes: fb}
}

func share(n int64, gpuMem uint64) Shape {
	return Shape{Name: "share-" + strconv.FormatInt(n, 10), Kind: pb.Kind_KIND_SHARE.Label(), Fraction: big.NewRat(1, n),
		Capacity: 1 / float64(n), MemoryBytes: gpuMem / uint64(n)}
}

// Candidates are the shapes an instance may be advised, its own among them: those of its
// kind that its GPU model offers (MIG → the model's MIG profiles, vGPU → its C-series vGPU
// profiles, share → 1 to MaxShareWays ways), and for a whole GPU the whole GPU and, on a
// MIG-capable model, its MIG profiles. A model the catalog does not know offers only the
// instance's own shape (and the shares, which any GPU can be split into).
func Candidates(in pricebook.Instance) ([]Shape, error) {
	cur, err := Current(in)
	if err != nil {
		return nil, err
	}
	out := []Shape{cur}
	model, known := hardware.Lookup(in.Model)
	add := func(s Shape) {
		if !slices.ContainsFunc(out, func(o Shape) bool { return o.Name == s.Name }) {
			out = append(out, s)
		}
	}
	migs := func() {
		for _, name := range model.MIGProfileNames() {
			p := model.MIG[name]
			add(Shape{Name: name, Kind: pb.Kind_KIND_MIG.Label(), Fraction: big.NewRat(int64(p.ComputeSlices), hardware.MaxComputeSlices),
				Capacity: float64(p.SMs) / float64(model.SMs), MemoryBytes: p.MemoryBytes})
		}
	}
	switch in.Kind {
	case pb.Kind_KIND_GPU.Label():
		if known {
			migs()
		}
	case pb.Kind_KIND_MIG.Label():
		if known {
			migs()
		}
	case pb.Kind_KIND_VGPU.Label():
		if known {
			for _, p := range model.VGPU {
				if p.MemoryBytes <= in.GPUMemTotalBytes {
					add(vgpu(p.Name, p.MemoryBytes, in.GPUMemTotalBytes))
				}
			}
		}
	case pb.Kind_KIND_SHARE.Label():
		for n := int64(1); n <= MaxShareWays; n++ {
			add(share(n, in.GPUMemTotalBytes))
		}
	}
	return out, nil
}

// Action is what the advice says to do.
type Action string

const (
	Downsize Action = "downsize" // a smaller shape holds the need with headroom
	Keep     Action = "keep"     // nothing smaller does
	Unknown  Action = "unknown"  // too little measured time to say
)

// Headroom is how much more than the need a shape must hold: capacity ≥ C × (1 + Compute),
// memory ≥ M × (1 + Memory).
type Headroom struct{ Compute, Memory float64 }

// DefaultHeadroom is the headroom of the flags' defaults.
var DefaultHeadroom = Headroom{Compute: 0.2, Memory: 0.1}

// SaturatedShare: an instance whose compute need reaches this share of its capacity ran at its
// limit.
const SaturatedShare = 0.95

// Need is what an allocation was measured to need.
type Need struct {
	Compute     float64 // C: p95 of the per-minute activity, whole-GPU units
	MemoryBytes uint64  // M: the highest memory used of its samples
	Measured    time.Duration
}

// Decision is the advice for one allocation.
type Decision struct {
	Action    Action
	Current   Shape
	Advised   Shape // the current shape when keep; zero when unknown
	Saturated bool
}

// Decide applies the rule to an instance and its need: among the candidates with capacity ≥
// C × (1 + headroom) and memory ≥ M × (1 + headroom), the one with the smallest billed
// fraction (ties: less memory, then name); downsize if its fraction is below the current
// one, else keep (no upsize is advised: demand above the current limit was not measured).
// Saturated when C ≥ 0.95 × the current capacity. Less than minMeasured measured: unknown.
func Decide(in pricebook.Instance, need Need, h Headroom, minMeasured time.Duration) (Decision, error) {
	cands, err := Candidates(in)
	if err != nil {
		return Decision{}, err
	}
	d := Decision{Current: cands[0]}
	if need.Measured < minMeasured || need.Measured <= 0 {
		d.Action = Unknown
		return d, nil
	}
	d.Saturated = need.Compute >= SaturatedShare*d.Current.Capacity
	compute, memory := need.Compute*(1+h.Compute), float64(need.MemoryBytes)*(1+h.Memory)
	fits := slices.DeleteFunc(slices.Clone(cands), func(s Shape) bool {
		return s.Capacity < compute || float64(s.MemoryBytes) < memory
	})
	d.Action, d.Advised = Keep, d.Current
	if len(fits) == 0 {
		return d, nil
	}
	best := slices.MinFunc(fits, func(a, b Shape) int {
		return cmp.Or(a.Fraction.Cmp(b.Fraction), cmp.Compare(a.MemoryBytes, b.MemoryBytes), cmp.Compare(a.Name, b.Name))
	})
	if best.Fraction.Cmp(d.Current.Fraction) < 0 {
		d.Action, d.Advised = Downsize, best
	}
	return d, nil
}

// P95 is the nearest-rank 95th percentile of the values (rank ⌈0.95 n⌉); 0 for none.
func P95(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	s := slices.Clone(values)
	slices.Sort(s)
	rank := int(math.Ceil(0.95 * float64(len(s))))
	return s[max(rank, 1)-1]
}

// MoneyScale is the decimals money is computed to (ClickHouse Decimal(38, 12), as stored);
// it is printed with 6.
const MoneyScale = 12

// Savings is (current − advised fraction) × wholeCost, wholeCost being what one whole GPU of
// the model costs the tenant over the billed time (list price × tier multiplier × billed
// hours, or the contract's), and the same scaled from window to 30 days. Exact: the fractions
// are rationals and the money decimal, rounded once to MoneyScale.
func Savings(wholeCost decimal.Decimal, current, advised *big.Rat, window time.Duration) (savings, savings30d decimal.Decimal) {
	diff := new(big.Rat).Sub(current, advised)
	num, den := decimal.NewFromBigInt(diff.Num(), 0), decimal.NewFromBigInt(diff.Denom(), 0)
	top := wholeCost.Mul(num)
	savings = top.DivRound(den, MoneyScale)
	if window > 0 {
		savings30d = top.Mul(decimal.NewFromInt(int64(30*24*time.Hour))).DivRound(den.Mul(decimal.NewFromInt(int64(window))), MoneyScale)
	}
	return savings, savings30d
}

// WholeCost is what one whole GPU of the model costs at the tenant's tier (or contract) over
// [from, to): list price × multiplier × hours, exact in decimal for a price book without dated
// prices or contracts, and the price book's own split (CostsBetween) for one with them.
func WholeCost(book *pricebook.PriceBook, tenant, tier, model string, from, to time.Time) (decimal.Decimal, error) {
	if book.Dated() {
		_, cost, err := book.CostsBetween(tenant, tier, model, 1, from, to)
		if err != nil {
			return decimal.Decimal{}, err
		}
		return decimal.NewFromFloat(cost), nil
	}
	price, err := book.Price(model)
	if err != nil {
		return decimal.Decimal{}, err
	}
	mult, err := book.Multiplier(tier)
	if err != nil {
		return decimal.Decimal{}, err
	}
	ns := decimal.NewFromInt(int64(to.Sub(from)))
	return decimal.NewFromFloat(price).Mul(decimal.NewFromFloat(mult)).Mul(ns).DivRound(decimal.NewFromInt(int64(time.Hour)), MoneyScale+6), nil
}
