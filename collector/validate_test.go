package collector

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/segmentio/kafka-go"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

func TestCheckSample(t *testing.T) {
	valid := func() *pb.Sample {
		return &pb.Sample{TsNs: 1_767_571_200_000_000_000, IntervalNs: 1e8, Kind: pb.Kind_KIND_MIG, InstanceId: "gpu0/mig0",
			ComputeSlices: 3, SmCount: 42, GpuSmCount: 108}
	}
	now := time.Unix(0, 1_767_571_200_000_000_000)
	if r := checkSample(valid(), now); r != nil {
		t.Fatalf("valid sample refused: %v", r)
	}
	for reason, mutate := range map[string]func(*pb.Sample){
		reasonMissingInstanceID:   func(s *pb.Sample) { s.InstanceId = "" },
		reasonUnknownKind:         func(s *pb.Sample) { s.Kind = pb.Kind_KIND_UNSPECIFIED },
		reasonMissingTimestamp:    func(s *pb.Sample) { s.TsNs = 0 },
		reasonTimestampOutOfRange: func(s *pb.Sample) { s.TsNs = maxTimestampNs + 1 },
		reasonMissingInterval:     func(s *pb.Sample) { s.IntervalNs = 0 },
		reasonInvalid:             func(s *pb.Sample) { s.SmActive = math.NaN() },
	} {
		s := valid()
		mutate(s)
		if r := checkSample(s, now); r == nil || r.reason != reason {
			t.Errorf("%s: got %v", reason, r)
		}
	}
	s := valid()
	s.Kind = 42
	if r := checkSample(s, now); r == nil || r.reason != reasonUnknownKind {
		t.Errorf("kind 42: got %v", r)
	}
}

func TestCheckAllocation(t *testing.T) {
	valid := func() *pb.AllocationEvent {
		return &pb.AllocationEvent{
			AllocationId: "a1", Tenant: "acme", Tier: "pro", Node: "node-a", InstanceId: "gpu0",
			RequestedAtNs: allocT0 + 100, StartedAtNs: allocT0 + 200, EndedAtNs: 0, Version: 1,
		}
	}
	if r := checkAllocation(valid(), nil); r != nil {
		t.Fatalf("valid allocation refused: %v", r)
	}
	a := valid()
	a.StartedAtNs, a.EndedAtNs = allocT0+100, allocT0+300 // started == requested, ended later
	if r := checkAllocation(a, nil); r != nil {
		t.Fatalf("valid allocation refused: %v", r)
	}
	for reason, mutate := range map[string]func(*pb.AllocationEvent){
		reasonMissingAllocationID:  func(a *pb.AllocationEvent) { a.AllocationId = "" },
		reasonMissingTenant:        func(a *pb.AllocationEvent) { a.Tenant = "" },
		reasonMissingTier:          func(a *pb.AllocationEvent) { a.Tier = "" },
		reasonMissingNode:          func(a *pb.AllocationEvent) { a.Node = "" },
		reasonMissingInstanceID:    func(a *pb.AllocationEvent) { a.InstanceId = "" },
		reasonStartedBeforeRequest: func(a *pb.AllocationEvent) { a.StartedAtNs = allocT0 + 99 },
		reasonEndedNotAfterStarted: func(a *pb.AllocationEvent) { a.EndedAtNs = allocT0 + 200 },
		reasonInvalid:              func(a *pb.AllocationEvent) { a.Tenant = "__unallocated__" },
	} {
		a := valid()
		mutate(a)
		if r := checkAllocation(a, nil); r == nil || r.reason != reason {
			t.Errorf("%s: got %v", reason, r)
		}
	}
	// With the price book's tiers, a tier it lacks is refused naming the field; without, the
	// tier is attribution's to report.
	tiers := map[string]float64{"pro": 1, "budget": 0.7}
	a = valid()
	a.Tier = "gold"
	if r := checkAllocation(a, nil); r != nil {
		t.Errorf("tier gold without a price book: refused: %v", r)
	}
	if r := checkAllocation(a, tiers); r == nil || r.reason != reasonInvalid || r.field != "tier" || !strings.Contains(r.detail, "budget, pro") {
		t.Errorf("tier gold with tiers budget, pro: got %v", r)
	}
	if r := checkAllocation(valid(), tiers); r != nil {
		t.Errorf("tier pro with tiers budget, pro: refused: %v", r)
	}
}

func TestHugeRefusedMessageKeepsItsCoordinatesNotItsValue(t *testing.T) {
	c, err := New(Config{Brokers: []string{"127.0.0.1:1"}}, nopConn{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	huge := make([]byte, 2<<20)
	huge[0] = 0xff // not protobuf
	c.process(kafka.Message{Topic: pb.TopicSamples, Partition: 3, Offset: 7, Key: []byte("node-a"), Value: huge}, time.Now())
	if len(c.deadLetters) != 1 {
		t.Fatalf("%d dead letters", len(c.deadLetters))
	}
	dl := c.deadLetters[0]
	if len(dl.Value) != 0 || header(dl, HeaderValueOmitted) != "2097152" || header(dl, HeaderReason) != reasonDecode ||
		header(dl, HeaderSourcePartition) != "3" || header(dl, HeaderSourceOffset) != "7" || string(dl.Key) != "node-a" {
		t.Errorf("dead letter: key %q, %d value bytes, headers %v", dl.Key, len(dl.Value), dl.Headers)
	}
}

// nopConn stands in for a ClickHouse connection in tests that never reach ClickHouse.
type nopConn struct{ driver.Conn }
