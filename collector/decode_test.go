package collector

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// fromWire rebuilds the generated struct from what the decoder produced, for comparison.
func fromWire(d *sampleDecoder) *pb.SampleBatch {
	b := &pb.SampleBatch{Node: d.node}
	for i := range d.samples {
		s := &d.samples[i]
		out := &pb.Sample{TsNs: s.tsNs, IntervalNs: s.intervalNs, GpuUuid: s.gpuUUID, GpuIndex: s.gpuIndex,
			Model: s.model, Kind: s.kind, InstanceId: s.instanceID, Profile: s.profile, Attached: s.attached,
			SmActive: s.smActive, MemUsedBytes: s.memUsed, MemTotalBytes: s.memTotal, PowerWatts: s.powerWatts,
			ComputeSlices: s.computeSlices, SmCount: s.smCount, GpuSmCount: s.gpuSMCount, GpuMemTotalBytes: s.gpuMemTotal,
			SmActiveUnavailable: s.smActiveUnavailable, ShareReplicas: s.shareReplicas,
			EnergyMj: s.energyMJ, EnergyPrevMj: s.energyPrevMJ, EnergyUnavailable: s.energyUnavailable}
		if w := d.waitsOf(s); s.runNs != 0 || s.switchNs != 0 || len(w) > 0 {
			out.Vgpu = &pb.VgpuSchedule{RunNs: s.runNs, SwitchNs: s.switchNs, WaitsNs: append([]uint64(nil), w...)}
		}
		b.Samples = append(b.Samples, out)
	}
	return b
}

// comparable drops what the decoder does not keep (seq, exporter_id, unknown fields, an empty
// vgpu message) so that proto.Unmarshal's result can be compared with fromWire's.
func comparableBatch(b *pb.SampleBatch) *pb.SampleBatch {
	out := &pb.SampleBatch{Node: b.GetNode()}
	for _, s := range b.GetSamples() {
		c := proto.Clone(s).(*pb.Sample)
		c.ProtoReflect().SetUnknown(nil)
		if v := c.GetVgpu(); v != nil {
			v.ProtoReflect().SetUnknown(nil)
			if v.RunNs == 0 && v.SwitchNs == 0 && len(v.WaitsNs) == 0 {
				c.Vgpu = nil
			} else if v.WaitsNs == nil {
				v.WaitsNs = nil
			}
		}
		if len(c.GetVgpu().GetWaitsNs()) == 0 && c.Vgpu != nil {
			c.Vgpu.WaitsNs = nil
		}
		out.Samples = append(out.Samples, c)
	}
	return out
}

func TestDecodeCases(t *testing.T) {
	full, _ := proto.Marshal(&pb.SampleBatch{Node: "node-a", Seq: 7, ExporterId: "x", Samples: []*pb.Sample{
		sample(pb.Kind_KIND_VGPU, "gpu1/vgpu0", base), sample(pb.Kind_KIND_MIG, "gpu0/mig1", base+1)}})
	unmeasured := sample(pb.Kind_KIND_MIG, "gpu0/mig1", base)
	unmeasured.SmActive, unmeasured.SmActiveUnavailable = 0, true
	unavailable, _ := proto.Marshal(&pb.SampleBatch{Node: "node-a", Samples: []*pb.Sample{
		unmeasured, sample(pb.Kind_KIND_MIG, "gpu0/mig2", base)}})
	// sm_active_unavailable as a varint other than 1 is still true; as fixed64 it is unknown.
	field19 := func(typ protowire.Type, v uint64) []byte {
		var s []byte
		s = protowire.AppendTag(s, 1, protowire.VarintType)
		s = protowire.AppendVarint(s, base)
		s = protowire.AppendTag(s, 19, typ)
		if typ == protowire.VarintType {
			s = protowire.AppendVarint(s, v)
		} else {
			s = protowire.AppendFixed64(s, v)
		}
		return protowire.AppendBytes(protowire.AppendTag(nil, 4, protowire.BytesType), s)
	}
	// A newer exporter: unknown fields at every level (varint, fixed32, bytes, group-free).
	var newer []byte
	newer = protowire.AppendTag(newer, 99, protowire.BytesType)
	newer = protowire.AppendBytes(newer, []byte("future"))
	var s []byte
	s = protowire.AppendTag(s, 1, protowire.VarintType)
	s = protowire.AppendVarint(s, base)
	s = protowire.AppendTag(s, 50, protowire.Fixed32Type)
	s = protowire.AppendFixed32(s, 5)
	var v []byte
	v = protowire.AppendTag(v, 3, protowire.VarintType) // unpacked waits
	v = protowire.AppendVarint(v, 11)
	v = protowire.AppendTag(v, 3, protowire.VarintType)
	v = protowire.AppendVarint(v, 12)
	v = protowire.AppendTag(v, 9, protowire.VarintType)
	v = protowire.AppendVarint(v, 1)
	s = protowire.AppendTag(s, 18, protowire.BytesType)
	s = protowire.AppendBytes(s, v)
	s = protowire.AppendTag(s, 10, protowire.Fixed64Type)
	s = protowire.AppendFixed64(s, math.Float64bits(0.25))
	s = protowire.AppendTag(s, 6, protowire.Fixed64Type) // known field, wrong wire type: unknown
	s = protowire.AppendFixed64(s, 1)
	newer = protowire.AppendTag(newer, 4, protowire.BytesType)
	newer = protowire.AppendBytes(newer, s)
	newer = protowire.AppendTag(newer, 1, protowire.BytesType) // node after the samples
	newer = protowire.AppendBytes(newer, []byte("node-z"))

	for _, tc := range []struct {
		name    string
		value   []byte
		wantErr bool
	}{
		{"full", full, false},
		{"sm_active unavailable", unavailable, false},
		{"sm_active_unavailable varint 2", field19(protowire.VarintType, 2), false},
		{"sm_active_unavailable fixed64", field19(protowire.Fixed64Type, 1), false},
		{"empty", nil, false},
		{"newer fields and unpacked waits", newer, false},
		{"truncated", full[:len(full)-3], true},
		{"field 0", []byte{0x00, 0x01}, true},
		{"bad utf8 node", protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0xff}), true},
		{"garbage", []byte{0xff, 0xff, 0xff}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d sampleDecoder
			err := d.decode(tc.value)
			var want pb.SampleBatch
			perr := proto.Unmarshal(tc.value, &want)
			if (err != nil) != tc.wantErr || (perr != nil) != tc.wantErr {
				t.Fatalf("decode error %v, proto.Unmarshal error %v, want error %v", err, perr, tc.wantErr)
			}
			if err != nil {
				return
			}
			if !proto.Equal(fromWire(&d), comparableBatch(&want)) {
				t.Errorf("decoded %v\nproto     %v", fromWire(&d), comparableBatch(&want))
			}
			// The rows buffered from either path are the same, sm_active_unavailable included.
			var wire, generated sampleColumns
			for i := range d.samples {
				wire.addWire(d.node, &d.samples[i], &d)
			}
			for _, s := range want.GetSamples() {
				generated.add(want.GetNode(), s)
			}
			if w, g := wire.columns(), generated.columns(); !reflect.DeepEqual(withoutWaits(w), withoutWaits(g)) {
				t.Errorf("columns from the decoder %v\nfrom proto.Unmarshal %v", w, g)
			}
		})
	}
}

// withoutWaits drops the vgpu_waits_ns column, whose empty values are nil on one path and
// empty slices on the other (the ClickHouse driver sends both as []).
func withoutWaits(columns []any) []any {
	i := slices.Index(tables.SampleColumns, "vgpu_waits_ns")
	return slices.Delete(slices.Clone(columns), i, i+1)
}

// FuzzDecodeMatchesProto: for any input the decoder fails exactly when proto.Unmarshal does,
// and otherwise yields the same batch.
func FuzzDecodeMatchesProto(f *testing.F) {
	full, _ := proto.Marshal(&pb.SampleBatch{Node: "n", Samples: []*pb.Sample{
		sample(pb.Kind_KIND_VGPU, "gpu1/vgpu0", base), sample(pb.Kind_KIND_GPU, "gpu0", base)}})
	unmeasured := sample(pb.Kind_KIND_MIG, "gpu0/mig0", base)
	unmeasured.SmActiveUnavailable = true
	mig, _ := proto.Marshal(&pb.SampleBatch{Node: "n", Samples: []*pb.Sample{unmeasured}})
	counted, reset, noCounter := sample(pb.Kind_KIND_GPU, "gpu0", base), sample(pb.Kind_KIND_GPU, "gpu1", base), sample(pb.Kind_KIND_GPU, "gpu2", base)
	counted.EnergyMj, counted.EnergyPrevMj = 1_030_000, 1_000_000
	reset.EnergyMj, reset.EnergyPrevMj = 500, 1_000_000
	noCounter.EnergyMj, noCounter.EnergyUnavailable = 7, true
	energy, _ := proto.Marshal(&pb.SampleBatch{Node: "n", Samples: []*pb.Sample{counted, reset, noCounter}})
	for _, v := range [][]byte{full, mig, energy, nil, {0xff}, []byte("not protobuf"), full[:10]} {
		f.Add(v)
	}
	var d sampleDecoder // reused on purpose: reuse must not leak state between messages
	f.Fuzz(func(t *testing.T, value []byte) {
		err := d.decode(value)
		var want pb.SampleBatch
		perr := proto.Unmarshal(value, &want)
		if (err != nil) != (perr != nil) {
			t.Fatalf("decode error %v, proto.Unmarshal error %v for %x", err, perr, value)
		}
		if err == nil && !proto.Equal(fromWire(&d), comparableBatch(&want)) {
			t.Fatalf("for %x:\ndecoded %v\nproto   %v", value, fromWire(&d), comparableBatch(&want))
		}
		// Both paths refuse the same samples for the same reason and field.
		for i, s := range want.GetSamples() {
			if i >= len(d.samples) {
				break
			}
			now := time.Unix(0, int64(base))
			if p, w := checkSample(s, now), checkWireSample(&d.samples[i], now); (p == nil) != (w == nil) || p != nil && (p.reason != w.reason || p.field != w.field) {
				t.Fatalf("sample %d of %x: checkSample %v, checkWireSample %v", i, value, p, w)
			}
		}
	})
}

// BenchmarkDecodeBatch decodes and buffers one exporter flush of 700 samples (7 instances ×
// 100 ticks), as processSamples does; allocs/op should be 0 once buffers have grown.
//
//	go test ./collector -run '^$' -bench 'DecodeBatch|UnmarshalBatch' -benchmem
func BenchmarkDecodeBatch(b *testing.B) {
	value := benchBatch(b)
	var d sampleDecoder
	var cols sampleColumns
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	for b.Loop() {
		if err := d.decode(value); err != nil {
			b.Fatal(err)
		}
		for i := range d.samples {
			cols.addWire(d.node, &d.samples[i], &d)
		}
		cols.reset()
	}
	b.ReportMetric(float64(b.N*700)/b.Elapsed().Seconds(), "samples/s")
}

// BenchmarkUnmarshalBatch is the same with proto.Unmarshal, for comparison.
func BenchmarkUnmarshalBatch(b *testing.B) {
	value := benchBatch(b)
	var cols sampleColumns
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	for b.Loop() {
		var batch pb.SampleBatch
		if err := proto.Unmarshal(value, &batch); err != nil {
			b.Fatal(err)
		}
		for _, s := range batch.Samples {
			cols.add(batch.Node, s)
		}
		cols.reset()
	}
	b.ReportMetric(float64(b.N*700)/b.Elapsed().Seconds(), "samples/s")
}

func benchBatch(b *testing.B) []byte {
	batch := &pb.SampleBatch{Node: "node-0001"}
	for i := range 7 {
		kind := pb.Kind_KIND_MIG
		if i >= 4 {
			kind = pb.Kind_KIND_VGPU
		}
		for tick := range 100 {
			batch.Samples = append(batch.Samples, sample(kind, fmt.Sprintf("gpu%d/x%d", i/4, i), base+uint64(tick)*1e8))
		}
	}
	value, err := proto.Marshal(batch)
	if err != nil {
		b.Fatal(err)
	}
	return value
}
