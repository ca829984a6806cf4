package kubernetes

import (
	"fmt"
	"strconv"
	"strings"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// Device is one device id of NVIDIA's device plugin mapped to the instance it names.
type Device struct {
	ID       string  // as the kubelet reports it
	Kind     pb.Kind // KIND_GPU, KIND_MIG or KIND_SHARE
	GPU      string  // the GPU's UUID (GPU-…); empty for a MIG device, whose GPU the id does not name
	Instance string  // the instance id samples carry: the GPU or MIG UUID, or the replica's device id
	Replica  int     // a share's replica number (the n of ::n)
}

// nvidiaResource says whether a resource name is one of NVIDIA's device plugin: nvidia.com/gpu,
// nvidia.com/gpu.shared (renameByDefault), nvidia.com/mig-<profile>. Other resources (NICs,
// FPGAs) are not GPUs and are left alone.
func nvidiaResource(name string) bool { return strings.HasPrefix(name, "nvidia.com/") }

// ParseDevice maps a device id of NVIDIA's device plugin to an instance:
//   - GPU-<uuid>: a whole GPU;
//   - MIG-<uuid>, also with a ::<n> suffix (a time-sliced MIG device, billed as the MIG
//     instance): a MIG instance, in the mixed and the single strategy alike (the id is the same);
//   - GPU-<uuid>::<n>: replica n of a time-sliced or MPS GPU, an instance of kind share.
//
// Anything else (the pre-R470 MIG-GPU-<uuid>/<gi>/<ci> form, bare indexes) is an error naming
// what was expected.
func ParseDevice(id string) (Device, error) {
	base, suffix, shared := strings.Cut(id, "::")
	replica := 0
	if shared {
		n, err := strconv.Atoi(suffix)
		if err != nil || n < 0 {
			return Device{}, fmt.Errorf("device id %q: the replica after :: is not a number", id)
		}
		replica = n
	}
	switch {
	case strings.HasPrefix(base, "GPU-") && isUUID(base[len("GPU-"):]):
		if shared {
			return Device{ID: id, Kind: pb.Kind_KIND_SHARE, GPU: base, Instance: id, Replica: replica}, nil
		}
		return Device{ID: id, Kind: pb.Kind_KIND_GPU, GPU: base, Instance: base}, nil
	case strings.HasPrefix(base, "MIG-") && isUUID(base[len("MIG-"):]):
		return Device{ID: id, Kind: pb.Kind_KIND_MIG, Instance: base, Replica: replica}, nil
	}
	return Device{}, fmt.Errorf("device id %q: expected GPU-<uuid>, MIG-<uuid> or GPU-<uuid>::<n>", id)
}

// isUUID says whether s is a UUID in its 8-4-4-4-12 hexadecimal form.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
