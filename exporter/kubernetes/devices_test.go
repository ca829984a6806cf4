package kubernetes

import (
	"testing"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

func TestParseDevice(t *testing.T) {
	const uuid = "9f6b2c1e-3a4d-5e6f-7081-92a3b4c5d6e7"
	for _, tc := range []struct {
		id       string
		kind     pb.Kind
		instance string
		gpu      string
		replica  int
		wantErr  bool
	}{
		{id: "GPU-" + uuid, kind: pb.Kind_KIND_GPU, instance: "GPU-" + uuid, gpu: "GPU-" + uuid},
		{id: "GPU-" + "9F6B2C1E-3A4D-5E6F-7081-92A3B4C5D6E7", kind: pb.Kind_KIND_GPU, instance: "GPU-9F6B2C1E-3A4D-5E6F-7081-92A3B4C5D6E7", gpu: "GPU-9F6B2C1E-3A4D-5E6F-7081-92A3B4C5D6E7"},
		// mixed strategy (nvidia.com/mig-1g.10gb) and single strategy (nvidia.com/gpu) name MIG devices alike
		{id: "MIG-" + uuid, kind: pb.Kind_KIND_MIG, instance: "MIG-" + uuid},
		{id: "MIG-" + uuid + "::3", kind: pb.Kind_KIND_MIG, instance: "MIG-" + uuid, replica: 3},
		{id: "GPU-" + uuid + "::0", kind: pb.Kind_KIND_SHARE, instance: "GPU-" + uuid + "::0", gpu: "GPU-" + uuid},
		{id: "GPU-" + uuid + "::11", kind: pb.Kind_KIND_SHARE, instance: "GPU-" + uuid + "::11", gpu: "GPU-" + uuid, replica: 11},
		{id: "GPU-" + uuid + "::x", wantErr: true},
		{id: "GPU-" + uuid + "::-1", wantErr: true},
		{id: "MIG-GPU-" + uuid + "/1/0", wantErr: true}, // pre-R470 form
		{id: "0", wantErr: true},
		{id: "GPU-1234", wantErr: true},
		{id: "gpu-" + uuid, wantErr: true},
		{id: "", wantErr: true},
	} {
		d, err := ParseDevice(tc.id)
		if tc.wantErr {
			if err == nil {
				t.Errorf("ParseDevice(%q) = %+v, want an error", tc.id, d)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseDevice(%q): %v", tc.id, err)
			continue
		}
		if d.Kind != tc.kind || d.Instance != tc.instance || d.GPU != tc.gpu || d.Replica != tc.replica || d.ID != tc.id {
			t.Errorf("ParseDevice(%q) = %+v, want kind %v instance %q gpu %q replica %d", tc.id, d, tc.kind, tc.instance, tc.gpu, tc.replica)
		}
	}
}
