package kubernetes

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Cgroup is the pod and container a process runs in, as its /proc/<pid>/cgroup says.
type Cgroup struct {
	PodUID      string // with dashes, as the API server spells it
	ContainerID string // 64 hex digits, without the runtime's prefix
}

// runtimePrefixes are what container runtimes put before the container id in the last path
// element of a cgroup (systemd driver): containerd, CRI-O, Docker (cri-dockerd).
var runtimePrefixes = []string{"cri-containerd-", "crio-", "docker-", "containerd-"}

// ParseCgroup finds the pod UID and container id in the text of /proc/<pid>/cgroup, cgroup v1
// (one line per hierarchy) or v2 (the single 0:: line), with the cgroupfs driver
// (/kubepods/burstable/pod<uid>/<id>) or the systemd driver
// (/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope),
// under containerd, CRI-O or Docker, also nested below another slice (kind, systemd units) or
// with the processes in a child of the container's cgroup (crun's /container). A
// process outside a pod's container (the host's, a CRI-O conmon) gives ok false.
func ParseCgroup(text string) (Cgroup, bool) {
	for _, line := range strings.Split(text, "\n") {
		// hierarchy-ID:controllers:path; the path may itself hold colons (systemd's slice:prefix:name).
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if c, ok := parseCgroupPath(parts[2]); ok {
			return c, true
		}
	}
	return Cgroup{}, false
}

// parseCgroupPath finds the pod element followed by its container's, scanning from the end: a
// runtime may put the processes below the container's cgroup (crun under CRI-O on cgroup v2:
// …/crio-<id>.scope/container), and all of that is the container's.
func parseCgroupPath(path string) (Cgroup, bool) {
	elems := strings.Split(strings.Trim(path, "/"), "/")
	for i := len(elems) - 1; i >= 1; i-- {
		id, ok := containerID(elems[i])
		if !ok {
			continue
		}
		if uid, ok := podUID(elems[i-1]); ok {
			return Cgroup{PodUID: uid, ContainerID: id}, true
		}
	}
	return Cgroup{}, false
}

// podUID reads the pod's UID from a cgroup path element: pod<uid> (cgroupfs) or
// kubepods[-<qos>]-pod<uid with underscores>.slice (systemd).
func podUID(elem string) (string, bool) {
	elem = strings.TrimSuffix(elem, ".slice")
	i := strings.LastIndex(elem, "pod")
	if i < 0 {
		return "", false
	}
	uid := strings.ReplaceAll(elem[i+len("pod"):], "_", "-")
	if !isUUID(uid) {
		return "", false
	}
	return strings.ToLower(uid), true
}

// containerID reads a container id from the cgroup path element below the pod's: <id> (cgroupfs) or
// <runtime>-<id>.scope (systemd). CRI-O's crio-conmon-<id>.scope is its monitor, not the
// container.
func containerID(elem string) (string, bool) {
	elem = strings.TrimSuffix(elem, ".scope")
	for _, p := range runtimePrefixes {
		if strings.HasPrefix(elem, p) {
			elem = elem[len(p):]
			break
		}
	}
	if len(elem) != 64 {
		return "", false
	}
	for _, c := range elem {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", false
		}
	}
	return elem, true
}

// TrimContainerID is a container status's containerID without its runtime scheme
// (containerd://, cri-o://, docker://), as cgroups name it.
func TrimContainerID(id string) string {
	if _, after, ok := strings.Cut(id, "://"); ok {
		return after
	}
	return id
}

// ReadCgroup reads the cgroup of process pid under procRoot (/proc; the host's with hostPID).
func ReadCgroup(procRoot string, pid uint32) (Cgroup, bool, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.FormatUint(uint64(pid), 10), "cgroup"))
	if err != nil {
		return Cgroup{}, false, fmt.Errorf("read the cgroup of process %d: %w", pid, err)
	}
	c, ok := ParseCgroup(string(b))
	return c, ok, nil
}
