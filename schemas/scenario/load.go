package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/slicemeter/slicemeter/schemas/hardware"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
	"github.com/slicemeter/slicemeter/schemas/validate"
)

// Error is a validation error: the file, the field and what was wrong. Callers treat it as a
// usage error (exit status 2).
type Error struct {
	File  string
	Field string
	Msg   string
	// Book is the price book's error that this one words as the scenario's, for a field of
	// the price book the scenario carries (errors.As finds it).
	Book *pricebook.Error
}

// Unwrap is the price book's error, if any.
func (e *Error) Unwrap() error {
	if e.Book == nil {
		return nil
	}
	return e.Book
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("scenario %s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("scenario %s: %s: %s", e.File, e.Field, e.Msg)
}

// Raw shapes of the YAML. Scalars are read as strings so that errors can quote what was written.
type rawScenario struct {
	Version  *int   `yaml:"version"`
	Name     string `yaml:"name"`
	Start    string `yaml:"start"`
	Duration string `yaml:"duration"`
	Interval string `yaml:"interval"`
	Loop     string `yaml:"loop"`
	IDs      string `yaml:"ids"`
	// The price book's fields (pricebook.ScenarioFields), read by pricebook.ParseFields; here
	// only so that the decoder knows them.
	Currency yaml.Node   `yaml:"currency"`
	Prices   yaml.Node   `yaml:"prices"`
	Tiers    yaml.Node   `yaml:"tiers"`
	SLA      yaml.Node   `yaml:"sla"`
	Costs    yaml.Node   `yaml:"costs"`
	Nodes    []rawNode   `yaml:"nodes"`
	Tenants  []rawTenant `yaml:"tenants"`
}

type rawNode struct {
	Name    string `yaml:"name"`
	Outages []struct {
		From string `yaml:"from"`
		To   string `yaml:"to"`
	} `yaml:"outages"`
	GPUs []struct {
		Model string   `yaml:"model"`
		MIG   []string `yaml:"mig"`
		GPM   *bool    `yaml:"gpm"`
		// Faults: see Fault.
		Faults []struct {
			Kind  string `yaml:"kind"`
			At    string `yaml:"at"`
			Until string `yaml:"until"`
			Code  *int64 `yaml:"code"`
			Count *int64 `yaml:"count"`
		} `yaml:"faults"`
		VGPU *struct {
			Profile   string `yaml:"profile"`
			Count     string `yaml:"count"`
			Scheduler string `yaml:"scheduler"`
			Timeslice string `yaml:"timeslice"`
			Switch    string `yaml:"switch"`
		} `yaml:"vgpu"`
		Share *struct {
			Mode     string `yaml:"mode"`
			Replicas string `yaml:"replicas"`
		} `yaml:"share"`
	} `yaml:"gpus"`
}

type rawTenant struct {
	Name        string `yaml:"name"`
	Tier        string `yaml:"tier"`
	Allocations []struct {
		Target    string `yaml:"target"`
		Requested string `yaml:"requested"`
		Ready     string `yaml:"ready"`
		End       string `yaml:"end"`
		Workload  struct {
			SM    *string    `yaml:"sm"`
			Steps [][]string `yaml:"steps"`
			Mem   string     `yaml:"mem"`
		} `yaml:"workload"`
	} `yaml:"allocations"`
}

// Load reads and validates a scenario file.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading scenario: %w", err)
	}
	return Parse(path, data)
}

// Parse validates scenario YAML; name is used in error messages.
func Parse(name string, data []byte) (*Scenario, error) {
	var raw rawScenario
	// A misspelt field is named by its path and line, with the closest known one, before the
	// decoder would name it by a Go type.
	var top yaml.Node
	if err := yaml.Unmarshal(data, &top); err == nil && len(top.Content) > 0 {
		if errs := unknownFields(name, top.Content[0], reflect.TypeFor[rawScenario]()); len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&raw); err != nil {
		return nil, &Error{File: name, Msg: "not a valid scenario (YAML, version 1): " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		return nil, &Error{File: name, Msg: fmt.Sprintf("not a valid scenario (YAML, version 1): %v", err)}
	}
	v := validator{file: name}
	s := v.scenario(&raw, doc.Content[0])
	if len(v.errs) > 0 {
		return nil, errors.Join(v.errs...)
	}
	s.Path = name
	return s, nil
}

// Caps on what a scenario may ask the simulator to build, far above any real fleet, so that a
// typo or a hostile file is refused with the field named instead of exhausting memory.
const (
	MaxNodes       = 10_000
	MaxGPUsPerNode = 16 // the densest servers hold 8 or 16
	MaxVGPUsPerGPU = 64 // no vGPU profile is smaller than 1/64 of a GPU's framebuffer
	// MaxSharesPerGPU bounds a shared GPU's replicas (the device plugin's replicas per GPU).
	MaxSharesPerGPU = 64
	// MaxInstances bounds the fleet's instances in all (GPUs, MIG instances, vGPUs, replicas):
	// each level's cap allows 10,000 × 16 × 64, ten million instances, which the simulator
	// would exhaust memory on. 200,000 is four times the largest fleet measured (README).
	MaxInstances = 200_000
)

type validator struct {
	file string
	errs []error
}

func (v *validator) fail(field, format string, args ...any) {
	v.errs = append(v.errs, &Error{File: v.file, Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) duration(field, s string, required bool) time.Duration {
	if s == "" {
		if required {
			v.fail(field, "missing; expected a duration such as 10m, 12s or 100ms")
		}
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		v.fail(field, "%q is not a duration; expected e.g. 10m, 12s or 100ms", s)
		return 0
	}
	if d < 0 {
		v.fail(field, "%q is negative; expected a duration >= 0", s)
	}
	return d
}

// offset fails when start + d, the time an offset given as raw stands for, lies outside what
// a sample or allocation may carry: it is converted to nanoseconds, which wrap after 2262.
// A zero start (not valid itself) is not checked.
func (v *validator) offset(start time.Time, field, raw string, d time.Duration) {
	if start.IsZero() {
		return
	}
	at := start.Add(d)
	if r := validate.CheckTime(field, strconv.Quote(raw), at); r != nil {
		v.fail(field, "%s after start is %s; expected %s", r.Value, at.Format(time.RFC3339Nano), r.Expected)
	}
}

func (v *validator) number(field, s string, lo, hi float64, what string) float64 {
	if s == "" {
		v.fail(field, "missing; expected %s", what)
		return 0
	}
	f, err := strconv.ParseFloat(s, 64)
	if err == nil && (math.IsNaN(f) || math.IsInf(f, 0)) {
		v.fail(field, "%q: expected a finite number, %s", s, what)
		return 0
	}
	if err != nil || f < lo || f > hi {
		v.fail(field, "%q: expected %s", s, what)
		return 0
	}
	return f
}

// book reads the price book the scenario carries; its errors are the scenario's, worded as
// the scenario's are (field: what was written: expected what), an unknown field as the YAML
// decoder words the scenario's own.
func (v *validator) book(doc *yaml.Node) *pricebook.PriceBook {
	book, err := pricebook.ParseFields(v.file, doc)
	if err == nil {
		for tier := range book.Tiers {
			if _, ok := book.ColdStart[tier]; !ok {
				book.ColdStart[tier] = pricebook.DefaultColdStartSLA
			}
		}
		return book
	}
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	for _, err := range errs {
		e, ok := err.(*pricebook.Error)
		if !ok {
			v.errs = append(v.errs, &Error{File: v.file, Msg: err.Error()})
			continue
		}
		msg := e.Got + ": expected " + e.Expected
		if e.Got == "unknown field" {
			msg = fmt.Sprintf("line %d: field %s not found; expected %s", e.Line, e.Field[strings.LastIndex(e.Field, ".")+1:], e.Expected)
		}
		v.errs = append(v.errs, &Error{File: v.file, Field: e.Field, Msg: msg, Book: e})
	}
	return nil
}

func (v *validator) scenario(raw *rawScenario, doc *yaml.Node) *Scenario {
	s := &Scenario{Name: raw.Name}
	switch {
	case raw.Version == nil:
		v.fail("version", "missing; expected 1")
	case *raw.Version != 1:
		v.fail("version", "%d is not supported; expected 1", *raw.Version)
	default:
		s.Version = 1
	}
	if s.Name == "" {
		v.fail("name", "missing; expected a non-empty name")
	}
	if raw.Start == "" {
		v.fail("start", "missing; expected an RFC 3339 time such as \"2026-01-05T00:00:00Z\"")
	} else if t, err := time.Parse(time.RFC3339Nano, raw.Start); err != nil {
		v.fail("start", "%q: expected an RFC 3339 time such as \"2026-01-05T00:00:00Z\"", raw.Start)
	} else if r := validate.CheckTime("start", strconv.Quote(raw.Start), t); r != nil {
		// Checked before anything converts it to nanoseconds, which wrap after 2262.
		v.fail("start", "%s: expected %s", r.Value, r.Expected)
	} else {
		s.Start = t.UTC()
	}
	s.Duration = v.duration("duration", raw.Duration, true)
	if raw.Duration != "" && s.Duration == 0 {
		v.fail("duration", "%q: expected a duration > 0", raw.Duration)
	}
	v.offset(s.Start, "duration", raw.Duration, s.Duration)
	s.Interval = v.duration("interval", raw.Interval, true)
	if raw.Interval != "" && s.Interval <= 0 {
		v.fail("interval", "%q: expected a duration > 0", raw.Interval)
	} else if s.Interval > validate.MaxInterval {
		v.fail("interval", "%s: expected at most %s (what a sample may stand for)", s.Interval, validate.MaxInterval)
	} else if s.Interval > 0 && s.Duration > 0 && s.Interval > s.Duration {
		v.fail("interval", "%s is longer than duration %s", s.Interval, s.Duration)
	}
	switch raw.Loop {
	case "", "false":
	case "true":
		s.Loop = true
		if s.Interval > 0 && s.Duration%s.Interval != 0 {
			v.fail("loop", "duration %s is not a multiple of interval %s: each repetition must sample the same offsets", s.Duration, s.Interval)
		}
	default:
		v.fail("loop", "%q: expected true or false", raw.Loop)
	}
	switch raw.IDs {
	case "", "index":
	case "uuid":
		s.UUIDs = true
	default:
		v.fail("ids", "%q: expected index (gpuN/migM, the default) or uuid (as on real hardware)", raw.IDs)
	}
	s.Book = v.book(doc)
	s.Nodes = v.nodes(raw.Nodes, s)
	s.Tenants = v.tenants(raw.Tenants, s)
	return s
}

func (v *validator) nodes(raw []rawNode, s *Scenario) []Node {
	if len(raw) == 0 {
		v.fail("nodes", "missing; expected at least one node")
	}
	if len(raw) > MaxNodes {
		v.fail("nodes", "%d nodes: expected at most %d", len(raw), MaxNodes)
		return nil
	}
	seen := map[string]bool{}
	var nodes []Node
	instances := 0
	defer func() {
		if instances > MaxInstances {
			v.fail("nodes", "%d instances (GPUs, MIG instances, vGPUs and replicas in all): expected at most %d", instances, MaxInstances)
		}
	}()
	for i, rn := range raw {
		f := fmt.Sprintf("nodes[%d]", i)
		n := Node{Name: rn.Name}
		if rn.Name == "" || strings.Contains(rn.Name, "/") {
			v.fail(f+".name", "%q: expected a non-empty name without '/'", rn.Name)
		} else if seen[rn.Name] {
			v.fail(f+".name", "%q is used by another node", rn.Name)
		}
		seen[rn.Name] = true
		for j, o := range rn.Outages {
			of := fmt.Sprintf("%s.outages[%d]", f, j)
			out := Outage{From: v.duration(of+".from", o.From, true), To: v.duration(of+".to", o.To, true)}
			if o.From != "" && o.To != "" && out.To <= out.From {
				v.fail(of, "to (%s) must be after from (%s)", o.To, o.From)
			}
			n.Outages = append(n.Outages, out)
		}
		if len(rn.GPUs) == 0 {
			v.fail(f+".gpus", "missing; expected at least one GPU")
		}
		if len(rn.GPUs) > MaxGPUsPerNode {
			v.fail(f+".gpus", "%d GPUs: expected at most %d per node", len(rn.GPUs), MaxGPUsPerNode)
			continue
		}
		for j, rg := range rn.GPUs {
			gf := fmt.Sprintf("%s.gpus[%d]", f, j)
			g := GPU{Model: rg.Model, MIG: rg.MIG, NoGPM: rg.GPM != nil && !*rg.GPM}
			model, ok := hardware.Lookup(rg.Model)
			if !ok {
				v.fail(gf+".model", "%q is not a known GPU model; expected one of %s", rg.Model, strings.Join(hardware.Names(), ", "))
			}
			if s.Book != nil && rg.Model != "" { // a book refused has said why already
				if _, priced := s.Book.Prices[rg.Model]; !priced {
					v.fail("prices", "no price for GPU model %q used by %s", rg.Model, gf)
				}
			}
			if n := boolCount(len(rg.MIG) > 0, rg.VGPU != nil, rg.Share != nil); n > 1 {
				v.fail(gf, "a GPU is split into MIG instances, hosts vGPUs or is shared as replicas: one of mig, vgpu and share, not %d", n)
			}
			if ok && len(rg.MIG) > 0 {
				if len(model.MIG) == 0 {
					v.fail(gf+".mig", "model %s does not support MIG", rg.Model)
				}
				slices := uint32(0)
				for k, p := range rg.MIG {
					prof, found := model.MIG[p]
					if !found && len(model.MIG) > 0 {
						v.fail(fmt.Sprintf("%s.mig[%d]", gf, k), "%q is not a MIG profile of %s; expected one of %s", p, rg.Model, strings.Join(model.MIGProfileNames(), ", "))
					}
					slices += prof.ComputeSlices
				}
				if slices > hardware.MaxComputeSlices {
					v.fail(gf+".mig", "the profiles use %d compute slices; a GPU has %d", slices, hardware.MaxComputeSlices)
				}
			}
			for k, rf := range rg.Faults {
				flt := v.fault(fmt.Sprintf("%s.faults[%d]", gf, k), rf.Kind, rf.At, rf.Until, s.Duration)
				v.xid(fmt.Sprintf("%s.faults[%d]", gf, k), &flt, rf.Code, rf.Count)
				g.Faults = append(g.Faults, flt)
			}
			if rg.VGPU != nil {
				g.VGPU = v.vgpu(gf+".vgpu", rg.VGPU.Profile, rg.VGPU.Count, rg.VGPU.Scheduler, rg.VGPU.Timeslice, rg.VGPU.Switch, model, ok)
			}
			if rg.Share != nil {
				g.Share = v.share(gf+".share", rg.Share.Mode, rg.Share.Replicas)
			}
			n.GPUs = append(n.GPUs, g)
			instances += gpuInstances(g)
		}
		nodes = append(nodes, n)
	}
	return nodes
}

// gpuInstances is how many instances g is metered as: its MIG instances, vGPUs or replicas,
// else the whole GPU.
func gpuInstances(g GPU) int {
	switch {
	case len(g.MIG) > 0:
		return len(g.MIG)
	case g.VGPU != nil:
		return max(g.VGPU.Count, 1)
	case g.Share != nil:
		return max(g.Share.Replicas, 1)
	}
	return 1
}

func (v *validator) fault(f, kind, at, until string, window time.Duration) Fault {
	flt := Fault{Kind: FaultKind(kind), At: v.duration(f+".at", at, true), Until: v.duration(f+".until", until, false)}
	if !slices.Contains(FaultKinds(), kind) {
		v.fail(f+".kind", "%q: expected one of %s", kind, strings.Join(FaultKinds(), ", "))
	}
	if window > 0 && flt.At >= window {
		v.fail(f+".at", "%s is not within the scenario's duration %s", at, window)
	}
	if until != "" && flt.Until <= flt.At {
		v.fail(f+".until", "%s must be after at (%s)", until, at)
	}
	return flt
}

// xid checks an xid fault's code and count (count defaults to 1); other kinds take neither.
func (v *validator) xid(f string, flt *Fault, code, count *int64) {
	if flt.Kind != FaultXID {
		if code != nil {
			v.fail(f+".code", "only an xid fault has a code (this one is %s)", flt.Kind)
		}
		if count != nil {
			v.fail(f+".count", "only an xid fault has a count (this one is %s)", flt.Kind)
		}
		return
	}
	switch {
	case code == nil:
		v.fail(f+".code", "missing: an xid fault needs the XID code (e.g. 79, fallen off the bus)")
	case *code <= 0 || *code > 1<<16:
		v.fail(f+".code", "%d: expected an XID code between 1 and 65536", *code)
	default:
		flt.Code = uint64(*code)
	}
	flt.Count = 1
	if count != nil {
		if *count < 1 || *count > MaxXIDCount {
			v.fail(f+".count", "%d: expected 1 to %d errors", *count, MaxXIDCount)
		} else {
			flt.Count = int(*count)
		}
	}
}

func (v *validator) vgpu(f, profile, count, scheduler, timeslice, sw string, model hardware.Model, known bool) *VGPU {
	g := &VGPU{Profile: profile, Scheduler: scheduler}
	fb, err := hardware.VGPUFramebuffer(profile)
	if err != nil {
		v.fail(f+".profile", "%v", err)
	}
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 || n > MaxVGPUsPerGPU {
		v.fail(f+".count", "%q: expected a whole number from 1 to %d", count, MaxVGPUsPerGPU)
		n = 0
	}
	g.Count = n
	if known && fb > 0 && n > 0 && fb*uint64(n) > model.MemoryBytes {
		v.fail(f+".count", "%d × %s needs %d GiB; %s has %d GiB", n, profile, fb*uint64(n)/hardware.GiB, model.Name, model.MemoryBytes/hardware.GiB)
	}
	if scheduler != "equal_share" {
		v.fail(f+".scheduler", "%q: expected equal_share", scheduler)
	}
	g.Timeslice = v.duration(f+".timeslice", timeslice, true)
	if timeslice != "" && g.Timeslice <= 0 {
		v.fail(f+".timeslice", "%q: expected a duration > 0", timeslice)
	}
	g.Switch = v.duration(f+".switch", sw, true)
	return g
}

func boolCount(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

func (v *validator) share(f, mode, replicas string) *Share {
	sh := &Share{Mode: mode}
	if !slices.Contains(ShareModes, mode) {
		v.fail(f+".mode", "%q: expected one of %s", mode, strings.Join(ShareModes, ", "))
	}
	n, err := strconv.Atoi(replicas)
	if err != nil || n < 1 || n > MaxSharesPerGPU {
		v.fail(f+".replicas", "%q: expected a whole number from 1 to %d", replicas, MaxSharesPerGPU)
		n = 0
	}
	sh.Replicas = n
	return sh
}

var targetRE = regexp.MustCompile(`^([^/]+)/gpu([0-9]+)(?:/(mig|vgpu|share)([0-9]+))?$`)

func (v *validator) tenants(raw []rawTenant, s *Scenario) []Tenant {
	seen := map[string]bool{}
	type hold struct {
		field      string
		start, end time.Duration
	}
	holds := map[string][]hold{}
	var tenants []Tenant
	for i, rt := range raw {
		f := fmt.Sprintf("tenants[%d]", i)
		t := Tenant{Name: rt.Name, Tier: rt.Tier}
		if r := validate.Tenant(rt.Name); r != nil {
			v.fail(f+".name", "%s: expected %s", r.Value, r.Expected)
		} else if seen[rt.Name] {
			v.fail(f+".name", "%q is used by another tenant", rt.Name)
		}
		seen[rt.Name] = true
		if s.Book != nil {
			if _, ok := s.Book.Tiers[rt.Tier]; !ok {
				v.fail(f+".tier", "%q is not in tiers (%s)", rt.Tier, strings.Join(sortedKeys(s.Book.Tiers), ", "))
			}
		}
		for j, ra := range rt.Allocations {
			af := fmt.Sprintf("%s.allocations[%d]", f, j)
			a := Allocation{
				Requested: v.duration(af+".requested", ra.Requested, true),
				Ready:     v.duration(af+".ready", ra.Ready, true),
				End:       v.duration(af+".end", ra.End, true),
			}
			v.offset(s.Start, af+".requested", ra.Requested, a.Requested)
			v.offset(s.Start, af+".ready", ra.Ready, a.Ready)
			v.offset(s.Start, af+".end", ra.End, a.End)
			if a.Ready < a.Requested {
				v.fail(af+".ready", "%s is before requested (%s)", ra.Ready, ra.Requested)
			}
			if a.End <= a.Ready && ra.End != "" {
				v.fail(af+".end", "%s must be after ready (%s)", ra.End, ra.Ready)
			}
			target, ok := v.target(af+".target", ra.Target, s)
			a.Target = target
			a.Workload = v.workload(af+".workload", ra.Workload.SM, ra.Workload.Steps, ra.Workload.Mem, target.Kind)
			if ok {
				key := target.Node + "/" + target.Instance
				for _, h := range holds[key] {
					if a.Requested < h.end && h.start < a.End {
						v.fail(af, "overlaps %s on %s", h.field, ra.Target)
					}
				}
				holds[key] = append(holds[key], hold{af, a.Requested, a.End})
			}
			t.Allocations = append(t.Allocations, a)
		}
		tenants = append(tenants, t)
	}
	return tenants
}

func (v *validator) target(f, raw string, s *Scenario) (Target, bool) {
	m := targetRE.FindStringSubmatch(raw)
	if m == nil {
		v.fail(f, "%q: expected node/gpuN, node/gpuN/migM, node/gpuN/vgpuM or node/gpuN/shareM", raw)
		return Target{Raw: raw}, false
	}
	gi, _ := strconv.Atoi(m[2])
	t := Target{Node: m[1], GPU: gi, Kind: "gpu", Raw: raw, Instance: "gpu" + m[2]}
	if m[3] != "" {
		t.Kind = m[3]
		t.Index, _ = strconv.Atoi(m[4])
		t.Instance = fmt.Sprintf("gpu%d/%s%d", gi, m[3], t.Index)
	}
	var node *Node
	for i := range s.Nodes {
		if s.Nodes[i].Name == t.Node {
			node = &s.Nodes[i]
		}
	}
	if node == nil {
		v.fail(f, "%q: no node named %q", raw, t.Node)
		return t, false
	}
	if gi >= len(node.GPUs) {
		v.fail(f, "%q: node %s has %d GPU(s)", raw, t.Node, len(node.GPUs))
		return t, false
	}
	g := node.GPUs[gi]
	switch {
	case t.Kind != g.Kind():
		v.fail(f, "%q: gpu%d of %s is a %s GPU; expected a target of that kind", raw, gi, t.Node, kindWord(g.Kind()))
		return t, false
	case t.Kind == "mig" && t.Index >= len(g.MIG):
		v.fail(f, "%q: gpu%d has %d MIG instance(s)", raw, gi, len(g.MIG))
		return t, false
	case t.Kind == "vgpu" && g.VGPU != nil && t.Index >= g.VGPU.Count:
		v.fail(f, "%q: gpu%d has %d vGPU instance(s)", raw, gi, g.VGPU.Count)
		return t, false
	case t.Kind == "share" && g.Share != nil && t.Index >= g.Share.Replicas:
		v.fail(f, "%q: gpu%d is shared as %d replica(s)", raw, gi, g.Share.Replicas)
		return t, false
	}
	return t, true
}

func kindWord(k string) string {
	switch k {
	case "mig":
		return "MIG-partitioned"
	case "vgpu":
		return "vGPU-hosting"
	case "share":
		return "shared (replicas)"
	default:
		return "whole"
	}
}

func (v *validator) workload(f string, sm *string, steps [][]string, mem string, kind string) Workload {
	var w Workload
	smValue := func(field, s string) float64 {
		x := v.number(field, s, 0, 1, "an SM activity in [0, 1]")
		if kind == "vgpu" && x != 0 && x != 1 {
			v.fail(field, "%s: a vGPU workload's sm is 0 or 1 in scenario version 1", s)
		}
		// NVML's per-process utilization is a whole percent: a finer figure could not be
		// observed, so the ground truth would not be the samples'.
		if kind == "share" && math.Abs(x*100-math.Round(x*100)) > 1e-9 {
			v.fail(field, "%s: a share workload's sm is a whole percent (e.g. 0.35)", s)
		}
		return x
	}
	switch {
	case sm != nil && steps != nil:
		v.fail(f, "give either sm or steps, not both")
	case sm != nil:
		w.Steps = []Step{{At: 0, SM: smValue(f+".sm", *sm)}}
	case steps != nil:
		for i, st := range steps {
			sf := fmt.Sprintf("%s.steps[%d]", f, i)
			if len(st) != 2 {
				v.fail(sf, "expected [offset, sm], e.g. [20m, 0.9]")
				continue
			}
			step := Step{At: v.duration(sf+"[0]", st[0], true), SM: smValue(sf+"[1]", st[1])}
			if i > 0 && step.At <= w.Steps[len(w.Steps)-1].At {
				v.fail(sf, "offset %s is not after the previous step's", st[0])
			}
			w.Steps = append(w.Steps, step)
		}
	default:
		v.fail(f, "missing sm or steps; expected e.g. {sm: 0.5, mem: 0.6}")
	}
	if mem == "" {
		w.Mem = 0
	} else {
		w.Mem = v.number(f+".mem", mem, 0, 1, "a memory share in [0, 1]")
	}
	return w
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
