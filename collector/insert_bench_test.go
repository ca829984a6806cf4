package collector

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// BenchmarkInsertSamples100k measures one ClickHouse batch insert of 100,000 sample rows (the
// default FlushRows), the way a flush sends them: whole columns, one PrepareBatch.
//
//	go test ./collector -run '^$' -bench InsertSamples100k -benchtime 5x
func BenchmarkInsertSamples100k(b *testing.B) {
	const rows = 100_000
	conn := localtest.Database(b, localtest.DatabaseOptions{}).Conn
	var cols sampleColumns
	kinds := []pb.Kind{pb.Kind_KIND_GPU, pb.Kind_KIND_MIG, pb.Kind_KIND_VGPU}
	for i := range rows {
		node := fmt.Sprintf("node-%03d", i%100)
		s := sample(kinds[i%3], fmt.Sprintf("gpu%d/x%d", i%8, i%7), base+uint64(i/100)*100_000_000)
		cols.add(node, s)
	}
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if err := insertColumns(ctx, conn, tables.Samples, tables.SampleColumns, cols.columns()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows*b.N)/time.Since(start).Seconds(), "rows/s")
}

// BenchmarkCollect100k measures the whole path for 100,000 samples already in Kafka (kfake):
// fetch, decode, validate, one insert, commit.
func BenchmarkCollect100k(b *testing.B) {
	const perBatch, batches = 1000, 100
	kinds := []pb.Kind{pb.Kind_KIND_GPU, pb.Kind_KIND_MIG, pb.Kind_KIND_VGPU}
	var elapsed time.Duration
	for i := range b.N {
		b.StopTimer()
		brokers := localtest.FakeKafka(b)
		conn := localtest.Database(b, localtest.DatabaseOptions{Name: fmt.Sprintf("collector_bench_e2e_%d", i)}).Conn
		for n := range batches {
			batch := &pb.SampleBatch{Node: fmt.Sprintf("node-%03d", n)}
			for j := range perBatch {
				batch.Samples = append(batch.Samples, sample(kinds[j%3], fmt.Sprintf("gpu%d/x%d", j%8, j), base+uint64(j)*100_000_000))
			}
			produce(b, brokers, sampleMessage(b, batch))
		}
		c, err := New(Config{Brokers: brokers, GroupID: "bench", FlushInterval: 5 * time.Second}, conn, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		b.StartTimer()
		start := time.Now()
		go func() { done <- c.Run(ctx) }()
		for {
			if s, _ := c.Stored(); s == perBatch*batches {
				break
			}
			time.Sleep(time.Millisecond)
		}
		elapsed += time.Since(start)
		b.StopTimer()
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(perBatch*batches*b.N)/elapsed.Seconds(), "rows/s")
}
