package nvmlsource

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// drainEvents takes the events queued since the last tick: XIDs are counted per GPU.
func (s *Source) drainEvents() {
	if s.events == nil {
		return
	}
	for range 1000 { // bounded: a storm of events must not stall the tick
		e, r := s.events.Wait(0)
		if r == nvml.ERROR_TIMEOUT {
			s.count("nvmlEventSetWait")
			return
		}
		if !s.ok(nil, "nvmlEventSetWait", r) {
			return
		}
		for _, g := range s.gpus {
			if g.dev != nil && g.dev == e.Device {
				if e.EventType&nvml.EventTypeXidCriticalError != 0 {
					g.xids++
					g.lastXID = e.EventData
					// A failing GPU can raise the same XID many times a second: one line a
					// minute per GPU and XID, with the count (slicemeter_gpu_xid_errors_total
					// has them all).
					s.logs.Log(context.Background(), time.Now(), slog.LevelWarn, fmt.Sprintf("xid %d %s", e.EventData, g.uuid), "XID error",
						"gpu", g.index, "uuid", g.uuid, "xid", e.EventData)
				}
			}
		}
	}
}

// openEvents creates the event set the GPUs' XID and double-bit ECC events are registered in.
func (s *Source) openEvents() {
	if s.has("nvmlEventSetCreate") {
		if set, r := s.lib.EventSetCreate(); s.ok(nil, "nvmlEventSetCreate", r) {
			s.events = set
		}
	}
}

// registerEvents registers a GPU's critical XID and double-bit ECC events.
func (s *Source) registerEvents(g *gpuDev) {
	if s.events != nil {
		r := g.dev.RegisterEvents(nvml.EventTypeXidCriticalError|nvml.EventTypeDoubleBitEccError, s.events)
		s.ok(g, "nvmlDeviceRegisterEvents", r)
	}
}
