package collector

import (
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// sampleDecoder decodes a SampleBatch from its wire bytes without building the generated
// structs: proto.Unmarshal allocates a Sample (and its strings, its VgpuSchedule and its waits)
// per sample, which at fleet rates is most of the collector's garbage. Strings are interned
// (a fleet has few distinct nodes, models, profiles and instance ids), waits share one backing
// array, and the decoded samples are reused from message to message, so a steady stream
// decodes without allocating. Unknown fields (a newer exporter) are skipped, as proto.Unmarshal
// does; FuzzDecodeMatchesProto holds the two to the same results.
type sampleDecoder struct {
	node    string
	samples []wireSample
	waits   []uint64 // backing array of every wireSample.waits of the message
	strs    map[string]string
}

// wireSample is one decoded Sample; waits indexes sampleDecoder.waits.
type wireSample struct {
	tsNs, intervalNs, memUsed, memTotal, gpuMemTotal uint64
	gpuIndex, computeSlices, smCount, gpuSMCount     uint32
	shareReplicas                                    uint32
	energyMJ, energyPrevMJ                           uint64 // the GPU's energy counter at this and the previous tick
	energyUnavailable                                bool
	kind                                             pb.Kind
	attached, smActiveUnavailable                    bool
	smActive, powerWatts                             float64
	gpuUUID, model, instanceID, profile              string
	runNs, switchNs                                  uint64
	waitsFrom, waitsTo                               int
}

// maxInterned bounds the intern table; past it the table starts over (ids of instances long
// gone would otherwise stay forever).
const maxInterned = 1 << 16

var errInvalidUTF8 = errors.New("string field is not valid UTF-8")

// decode parses value as a SampleBatch. On error nothing of value is kept.
func (d *sampleDecoder) decode(value []byte) error {
	d.node, d.samples, d.waits = "", d.samples[:0], d.waits[:0]
	for b := value; len(b) > 0; {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			s, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			str, err := d.intern(s)
			if err != nil {
				return fmt.Errorf("node: %w", err)
			}
			d.node, b = str, b[n:]
		case num == 3 && typ == protowire.BytesType:
			// exporter_id is not stored, but proto.Unmarshal refuses it when not UTF-8.
			s, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			if !utf8.Valid(s) {
				return fmt.Errorf("exporter_id: %w", errInvalidUTF8)
			}
			b = b[n:]
		case num == 4 && typ == protowire.BytesType:
			s, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			d.samples = append(d.samples, wireSample{})
			if err := d.decodeSample(s, &d.samples[len(d.samples)-1]); err != nil {
				return fmt.Errorf("sample %d: %w", len(d.samples)-1, err)
			}
			b = b[n:]
		default:
			var err error
			if b, err = skipField(num, typ, b); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *sampleDecoder) decodeSample(b []byte, s *wireSample) error {
	s.waitsFrom, s.waitsTo = len(d.waits), len(d.waits)
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v uint64
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			var raw []byte
			raw, n = protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			if err := d.sampleBytesField(num, raw, s); err != nil {
				return err
			}
			b = b[n:]
			continue
		default:
			var err error
			if b, err = skipField(num, typ, b); err != nil {
				return err
			}
			continue
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		varint := typ == protowire.VarintType
		// A known field with another wire type is an unknown field to proto.Unmarshal too.
		switch {
		case num == 1 && varint:
			s.tsNs = v
		case num == 2 && varint:
			s.intervalNs = v
		case num == 4 && varint:
			s.gpuIndex = uint32(v)
		case num == 6 && varint:
			s.kind = pb.Kind(int32(v))
		case num == 9 && varint:
			s.attached = v != 0
		case num == 10 && !varint:
			s.smActive = math.Float64frombits(v)
		case num == 11 && varint:
			s.memUsed = v
		case num == 12 && varint:
			s.memTotal = v
		case num == 13 && !varint:
			s.powerWatts = math.Float64frombits(v)
		case num == 14 && varint:
			s.computeSlices = uint32(v)
		case num == 15 && varint:
			s.smCount = uint32(v)
		case num == 16 && varint:
			s.gpuSMCount = uint32(v)
		case num == 17 && varint:
			s.gpuMemTotal = v
		case num == 19 && varint:
			s.smActiveUnavailable = v != 0
		case num == 20 && varint:
			s.shareReplicas = uint32(v)
		case num == 21 && varint:
			s.energyMJ = v
		case num == 22 && varint:
			s.energyUnavailable = v != 0
		case num == 23 && varint:
			s.energyPrevMJ = v
		}
	}
	return nil
}

func (d *sampleDecoder) sampleBytesField(num protowire.Number, raw []byte, s *wireSample) error {
	var dst *string
	switch num {
	case 3:
		dst = &s.gpuUUID
	case 5:
		dst = &s.model
	case 7:
		dst = &s.instanceID
	case 8:
		dst = &s.profile
	case 18:
		return d.decodeVgpu(raw, s) // a repeated occurrence merges into the first, as in proto
	default:
		return nil // unknown
	}
	str, err := d.intern(raw)
	if err != nil {
		return fmt.Errorf("field %d: %w", num, err)
	}
	*dst = str
	return nil
}

func (d *sampleDecoder) decodeVgpu(b []byte, s *wireSample) error {
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case (num == 1 || num == 2 || num == 3) && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			switch num {
			case 1:
				s.runNs = v
			case 2:
				s.switchNs = v
			default:
				d.addWait(s, v)
			}
		case num == 3 && typ == protowire.BytesType: // packed waits
			packed, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			for len(packed) > 0 {
				v, n := protowire.ConsumeVarint(packed)
				if n < 0 {
					return protowire.ParseError(n)
				}
				packed = packed[n:]
				d.addWait(s, v)
			}
		default:
			var err error
			if b, err = skipField(num, typ, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// consumeTag is protowire.ConsumeTag that also refuses field numbers above the largest valid
// one, as proto.Unmarshal does.
func consumeTag(b []byte) (protowire.Number, protowire.Type, int) {
	num, typ, n := protowire.ConsumeTag(b)
	if n >= 0 && num > protowire.MaxValidNumber {
		return 0, 0, -1
	}
	return num, typ, n
}

// addWait appends a wait of s; s's waits are the last ones appended, so they stay contiguous.
func (d *sampleDecoder) addWait(s *wireSample, v uint64) {
	d.waits = append(d.waits, v)
	s.waitsTo = len(d.waits)
}

// intern returns b as a string, the same string for the same bytes while it stays in the
// table; the map lookup with string(b) does not allocate.
func (d *sampleDecoder) intern(b []byte) (string, error) {
	if s, ok := d.strs[string(b)]; ok {
		return s, nil
	}
	if !utf8.Valid(b) {
		return "", errInvalidUTF8
	}
	if d.strs == nil || len(d.strs) >= maxInterned {
		d.strs = make(map[string]string, 256)
	}
	s := string(b)
	d.strs[s] = s
	return s, nil
}

// waitsOf returns s's waits, a view into the decoder's buffer valid until the next decode.
func (d *sampleDecoder) waitsOf(s *wireSample) []uint64 { return d.waits[s.waitsFrom:s.waitsTo] }

// skipField is b past the value of a field the decoder does not read (unknown to it, or of
// another wire type than expected: proto.Unmarshal skips those too).
func skipField(num protowire.Number, typ protowire.Type, b []byte) ([]byte, error) {
	n := protowire.ConsumeFieldValue(num, typ, b)
	if n < 0 {
		return nil, protowire.ParseError(n)
	}
	return b[n:], nil
}
