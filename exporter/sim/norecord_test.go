package sim

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/schemas/scenario"
)

// A simulated exporter runs for hours: reading it must not accumulate memory (go-nvml's mocks
// record every call; norecord.go keeps the per-tick calls out of that record).
func TestReadingDoesNotAccumulate(t *testing.T) {
	sc, err := scenario.Load("../../deploy/demo/fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src, err := New(sc, "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	read := func(from, to int) {
		for n := from; n < to; n++ {
			if _, err := src.Read(context.Background(), sc.Start.Add(time.Duration(n)*sc.Interval), sc.Interval); err != nil {
				t.Fatal(err)
			}
		}
	}
	read(0, 600) // warm up: buffers reach their working size
	before := heap()
	read(600, 6600) // ten simulated minutes; the leak this guards against grew ~75 MB here
	if grew := int64(heap()) - int64(before); grew > 8<<20 {
		t.Errorf("heap grew by %d MiB over 6000 ticks", grew>>20)
	}
	runtime.KeepAlive(src)
}
