package kubernetes

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseCgroup(t *testing.T) {
	const (
		uid  = "5c8f3b2a-1d4e-4f60-8a7b-9c0d1e2f3a4b"
		uidU = "5c8f3b2a_1d4e_4f60_8a7b_9c0d1e2f3a4b"
		cid  = "3f9a1c0b8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a3928170605f4e3"
	)
	want := Cgroup{PodUID: uid, ContainerID: cid}
	for _, tc := range []struct {
		name, text string
		ok         bool
	}{
		{"v2 systemd containerd burstable", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice/cri-containerd-" + cid + ".scope\n", true},
		{"v2 systemd containerd guaranteed", "0::/kubepods.slice/kubepods-pod" + uidU + ".slice/cri-containerd-" + cid + ".scope\n", true},
		{"v2 systemd cri-o besteffort", "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + uidU + ".slice/crio-" + cid + ".scope\n", true},
		{"v2 cgroupfs containerd", "0::/kubepods/burstable/pod" + uid + "/" + cid + "\n", true},
		{"v2 cgroupfs guaranteed", "0::/kubepods/pod" + uid + "/" + cid, true},
		{"v2 nested under kind's node slice", "0::/system.slice/docker-aa.scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod" + uidU + ".slice/cri-containerd-" + cid + ".scope", true},
		{"v1 cgroupfs docker", "12:pids:/kubepods/burstable/pod" + uid + "/" + cid + "\n11:memory:/kubepods/burstable/pod" + uid + "/" + cid + "\n1:name=systemd:/kubepods/burstable/pod" + uid + "/" + cid + "\n", true},
		{"v1 systemd docker, first lines outside", "13:rdma:/\n12:devices:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + uidU + ".slice/docker-" + cid + ".scope\n", true},
		{"v1 systemd cri-o", "10:cpu,cpuacct:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice/crio-" + cid + ".scope\n", true},
		// crun (CRI-O's default on RHEL 9 / OpenShift, cgroup v2) puts the processes one level
		// below the container's scope or directory.
		{"v2 systemd cri-o crun", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice/crio-" + cid + ".scope/container\n", true},
		{"v2 systemd cri-o crun guaranteed", "0::/kubepods.slice/kubepods-pod" + uidU + ".slice/crio-" + cid + ".scope/container", true},
		{"v2 cgroupfs cri-o crun", "0::/kubepods/besteffort/pod" + uid + "/crio-" + cid + "/container\n", true},
		{"v2 cgroupfs crun bare id", "0::/kubepods/burstable/pod" + uid + "/" + cid + "/container", true},
		{"v2 nested crun", "0::/system.slice/docker-aa.scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod" + uidU + ".slice/crio-" + cid + ".scope/container", true},
		{"crun conmon below the pod is not the container", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice/crio-conmon-" + cid + ".scope/container\n", false},
		{"container element not right below the pod", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice/other/crio-" + cid + ".scope\n", false},
		{"cri-o conmon is not the container", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice/crio-conmon-" + cid + ".scope\n", false},
		{"pod cgroup itself (pause-less)", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice\n", false},
		{"host process", "0::/system.slice/nvidia-persistenced.service\n", false},
		{"user session", "0::/user.slice/user-1000.slice/session-2.scope\n", false},
		{"empty", "", false},
	} {
		got, ok := ParseCgroup(tc.text)
		if ok != tc.ok || ok && got != want {
			t.Errorf("%s: ParseCgroup = %+v, %v; want %+v, %v", tc.name, got, ok, want, tc.ok)
		}
	}
}

func TestReadCgroup(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "4242")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	text := "0::/kubepods/pod5c8f3b2a-1d4e-4f60-8a7b-9c0d1e2f3a4b/3f9a1c0b8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a3928170605f4e3\n"
	if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if cg, ok, err := ReadCgroup(root, 4242); err != nil || !ok || cg.PodUID != "5c8f3b2a-1d4e-4f60-8a7b-9c0d1e2f3a4b" {
		t.Errorf("ReadCgroup(4242) = %+v, %v, %v", cg, ok, err)
	}
	if _, _, err := ReadCgroup(root, 1); err == nil {
		t.Error("ReadCgroup of a missing process: no error")
	}
}

func TestTrimContainerID(t *testing.T) {
	for in, want := range map[string]string{"containerd://abc": "abc", "cri-o://abc": "abc", "docker://abc": "abc", "abc": "abc"} {
		if got := TrimContainerID(in); got != want {
			t.Errorf("TrimContainerID(%q) = %q, want %q", in, got, want)
		}
	}
}
