package collector

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestInvalidValuesAreDeadLetteredAndTheRestStored: a NaN sample is dropped while the other
// samples of its batch are stored, a reserved tenant name is refused while the next
// allocation is stored, and each dead letter says reason invalid and the field.
func TestInvalidValuesAreDeadLetteredAndTheRestStored(t *testing.T) {
	brokers := localtest.FakeKafka(t)
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn

	nan := sample(pb.Kind_KIND_GPU, "gpu1", base)
	nan.SmActive = math.NaN()
	produce(t, brokers,
		sampleMessage(t, &pb.SampleBatch{Node: "node-a", Seq: 1, Samples: []*pb.Sample{
			sample(pb.Kind_KIND_GPU, "gpu0", base), nan, sample(pb.Kind_KIND_GPU, "gpu2", base),
		}}),
		allocationMessage(t, &pb.AllocationEvent{AllocationId: "a1", Tenant: "__unallocated__", Tier: "pro",
			Node: "node-a", InstanceId: "gpu0", RequestedAtNs: allocT0 + 1, StartedAtNs: allocT0 + 2, Version: 1}),
		allocationMessage(t, &pb.AllocationEvent{AllocationId: "a2", Tenant: "acme", Tier: "pro",
			Node: "node-a", InstanceId: "gpu2", RequestedAtNs: allocT0 + 1, StartedAtNs: allocT0 + 2, Version: 1}),
	)
	c, reg, stop := startCollector(t, Config{Brokers: brokers, GroupID: "invalid", FlushInterval: 100 * time.Millisecond}, conn)
	waitFor(t, 20*time.Second, "2 samples and 1 allocation stored", func() bool {
		s, a := c.Stored()
		return s == 2 && a == 1
	})
	var ids []string
	rows, err := conn.Query(t.Context(), "SELECT instance_id FROM samples ORDER BY instance_id")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if len(ids) != 2 || ids[0] != "gpu0" || ids[1] != "gpu2" {
		t.Errorf("stored samples %v, want gpu0 and gpu2", ids)
	}
	var tenants []string
	rows, err = conn.Query(t.Context(), "SELECT tenant FROM allocations")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var tenant string
		if err := rows.Scan(&tenant); err != nil {
			t.Fatal(err)
		}
		tenants = append(tenants, tenant)
	}
	rows.Close()
	if len(tenants) != 1 || tenants[0] != "acme" {
		t.Errorf("stored tenants %v, want acme", tenants)
	}

	fields := map[string]string{} // source topic: field
	for _, m := range readDeadLetters(t, brokers, 2) {
		if r := header(m, HeaderReason); r != reasonInvalid {
			t.Errorf("dead letter from %s: reason %q, want %q", header(m, HeaderSourceTopic), r, reasonInvalid)
		}
		fields[header(m, HeaderSourceTopic)] = header(m, HeaderField)
	}
	if fields[pb.TopicSamples] != "sm_active" || fields[pb.TopicAllocations] != "tenant" {
		t.Errorf("dead-letter fields by topic %v, want sm_active for samples and tenant for allocations", fields)
	}
	waitFor(t, 10*time.Second, "dead letters counted", func() bool {
		return metricValue(t, reg, "slicemeter_collector_deadlettered_total", map[string]string{"topic": pb.TopicAllocations, "reason": reasonInvalid}) == 1
	})
	for _, tc := range []struct {
		name   string
		labels map[string]string
	}{
		{"slicemeter_collector_deadlettered_total", map[string]string{"topic": pb.TopicSamples, "reason": reasonInvalid}},
		{"slicemeter_collector_samples_dropped_total", map[string]string{"reason": reasonInvalid}},
	} {
		if got := metricValue(t, reg, tc.name, tc.labels); got != 1 {
			t.Errorf("%s%v = %v, want 1", tc.name, tc.labels, got)
		}
	}
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestUnknownTierIsDeadLetteredWithThePriceBooksTiers: a collector given the price book's
// tiers refuses an allocation at another tier (it could not be priced) and stores the next.
func TestUnknownTierIsDeadLetteredWithThePriceBooksTiers(t *testing.T) {
	brokers := localtest.FakeKafka(t)
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn
	produce(t, brokers,
		allocationMessage(t, &pb.AllocationEvent{AllocationId: "a1", Tenant: "acme", Tier: "gold",
			Node: "node-a", InstanceId: "gpu0", RequestedAtNs: allocT0 + 1, StartedAtNs: allocT0 + 2, Version: 1}),
		allocationMessage(t, &pb.AllocationEvent{AllocationId: "a2", Tenant: "acme", Tier: "pro",
			Node: "node-a", InstanceId: "gpu1", RequestedAtNs: allocT0 + 1, StartedAtNs: allocT0 + 2, Version: 1}),
	)
	c, reg, stop := startCollector(t, Config{Brokers: brokers, GroupID: "tiers", FlushInterval: 100 * time.Millisecond,
		Book: &pricebook.PriceBook{Tiers: map[string]float64{"pro": 1, "budget": 0.7}}}, conn)
	waitFor(t, 20*time.Second, "1 allocation stored", func() bool {
		_, a := c.Stored()
		return a == 1
	})
	var id string
	if err := conn.QueryRow(t.Context(), "SELECT allocation_id FROM allocations").Scan(&id); err != nil || id != "a2" {
		t.Errorf("stored allocation %q (%v), want a2 only", id, err)
	}
	m := readDeadLetters(t, brokers, 1)[0]
	if r, f := header(m, HeaderReason), header(m, HeaderField); r != reasonInvalid || f != "tier" {
		t.Errorf("dead letter: reason %q field %q, want %q and tier", r, f, reasonInvalid)
	}
	waitFor(t, 10*time.Second, "the dead letter counted", func() bool {
		return metricValue(t, reg, "slicemeter_collector_deadlettered_total", map[string]string{"topic": pb.TopicAllocations, "reason": reasonInvalid}) == 1
	})
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestImpossibleMIGFactsAndVersionsAreDeadLettered: MIG samples with facts no MIG instance has
// (0 compute slices; 500 SMs on a 108-SM GPU) are dead-lettered naming the field while the
// valid MIG sample of their batch is stored, and an allocation event at a version no change
// could follow (the top of UInt64: a POST after it wrapped to version 0) is dead-lettered
// naming version while the next allocation is stored. Each is counted.
func TestImpossibleMIGFactsAndVersionsAreDeadLettered(t *testing.T) {
	brokers := localtest.FakeKafka(t)
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn

	mig := func(id string, slices, sms uint32) *pb.Sample {
		s := sample(pb.Kind_KIND_MIG, id, base)
		s.Model, s.Profile, s.ComputeSlices, s.SmCount, s.GpuSmCount = "A100-SXM4-40GB", "3g.20gb", slices, sms, 108
		return s
	}
	produce(t, brokers,
		// A batch is dead-lettered once, naming its first refused sample's field.
		sampleMessage(t, &pb.SampleBatch{Node: "node-a", Seq: 1, Samples: []*pb.Sample{mig("gpu0/mig0", 0, 42), mig("gpu0/mig1", 3, 42)}}),
		sampleMessage(t, &pb.SampleBatch{Node: "node-a", Seq: 2, Samples: []*pb.Sample{mig("gpu0/mig2", 3, 500)}}),
		allocationMessage(t, &pb.AllocationEvent{AllocationId: "a1", Tenant: "acme", Tier: "pro",
			Node: "node-a", InstanceId: "gpu0/mig0", RequestedAtNs: allocT0 + 1, StartedAtNs: allocT0 + 2, Version: math.MaxUint64}),
		allocationMessage(t, &pb.AllocationEvent{AllocationId: "a2", Tenant: "acme", Tier: "pro",
			Node: "node-a", InstanceId: "gpu0/mig1", RequestedAtNs: allocT0 + 1, StartedAtNs: allocT0 + 2, Version: math.MaxInt64}),
	)
	c, reg, stop := startCollector(t, Config{Brokers: brokers, GroupID: "mig-facts", FlushInterval: 100 * time.Millisecond}, conn)
	waitFor(t, 20*time.Second, "1 sample and 1 allocation stored", func() bool {
		s, a := c.Stored()
		return s == 1 && a == 1
	})
	var id, alloc string
	if err := conn.QueryRow(t.Context(), "SELECT instance_id FROM samples").Scan(&id); err != nil || id != "gpu0/mig1" {
		t.Errorf("stored sample %q (%v), want gpu0/mig1 only", id, err)
	}
	if err := conn.QueryRow(t.Context(), "SELECT allocation_id FROM allocations").Scan(&alloc); err != nil || alloc != "a2" {
		t.Errorf("stored allocation %q (%v), want a2 only", alloc, err)
	}
	var fields []string
	for _, m := range readDeadLetters(t, brokers, 3) {
		if r := header(m, HeaderReason); r != reasonInvalid {
			t.Errorf("dead letter from %s: reason %q, want %q", header(m, HeaderSourceTopic), r, reasonInvalid)
		}
		fields = append(fields, header(m, HeaderSourceTopic)+" "+header(m, HeaderField))
	}
	slices.Sort(fields)
	if want := []string{pb.TopicAllocations + " version", pb.TopicSamples + " compute_slices", pb.TopicSamples + " sm_count"}; !slices.Equal(fields, want) {
		t.Errorf("dead letters (topic, field) %q, want %q", fields, want)
	}
	waitFor(t, 10*time.Second, "dead letters counted", func() bool {
		return metricValue(t, reg, "slicemeter_collector_deadlettered_total", map[string]string{"topic": pb.TopicAllocations, "reason": reasonInvalid}) == 1
	})
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"slicemeter_collector_deadlettered_total", map[string]string{"topic": pb.TopicSamples, "reason": reasonInvalid}, 2},
		{"slicemeter_collector_samples_dropped_total", map[string]string{"reason": reasonInvalid}, 2},
	} {
		if got := metricValue(t, reg, tc.name, tc.labels); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
}
