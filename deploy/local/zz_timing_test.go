package local

import (
	"context"
	"testing"
	"time"
)

func TestZZTiming(t *testing.T) {
	ctx := context.Background()
	k, err := StartKafka(ctx, KafkaOptions{KeepDir: true})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	t.Log(k.Dir())
	b := time.Now()
	produce(t, ctx, k.Brokers(), "x", "v")
	t.Logf("produce %v", time.Since(b))
	b = time.Now()
	consume(t, ctx, k.Brokers(), "x", "g")
	t.Logf("consume %v", time.Since(b))
	b = time.Now()
	produce(t, ctx, k.Brokers(), "x", "v2")
	t.Logf("produce2 %v", time.Since(b))
	b = time.Now()
	consume(t, ctx, k.Brokers(), "x", "g")
	t.Logf("consume2 %v", time.Since(b))
}
