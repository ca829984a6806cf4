package kubernetes

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// maxPodResourcesMessage is the kubelet's own limit on a PodResources answer (16 MiB): a node
// at its pod maximum answers far less.
const maxPodResourcesMessage = 16 << 20

// PodResources is a client of the kubelet's PodResources v1 API on its unix socket. The
// connection is made lazily and kept, so a socket that is missing at start is retried by
// every call rather than failing the exporter.
type PodResources struct {
	conn   *grpc.ClientConn
	client podresourcesv1.PodResourcesListerClient
	socket string
}

// reconnectMax bounds gRPC's reconnection backoff (120 s by default): a kubelet restarted, or
// its socket created after the exporter started, is read again within seconds. Connecting to
// a local socket costs nothing.
const reconnectMax = 5 * time.Second

// DialPodResources prepares a client of the socket; it does not connect yet.
func DialPodResources(socket string) (*PodResources, error) {
	bo := backoff.DefaultConfig
	bo.MaxDelay = reconnectMax
	conn, err := grpc.NewClient("unix://"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: callTimeout}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxPodResourcesMessage)))
	if err != nil {
		return nil, fmt.Errorf("kubelet pod-resources socket %s: %w", socket, err)
	}
	return &PodResources{conn: conn, client: podresourcesv1.NewPodResourcesListerClient(conn), socket: socket}, nil
}

// Close closes the connection.
func (p *PodResources) Close() error { return p.conn.Close() }

// Assignment is one device the kubelet assigned to a container.
type Assignment struct {
	Namespace, Pod, Container string
	Resource                  string // nvidia.com/gpu, nvidia.com/mig-1g.10gb, …
	DeviceID                  string
}

// Snapshot is what the kubelet said at one refresh: the NVIDIA devices assigned to containers
// and the node's allocatable NVIDIA devices.
type Snapshot struct {
	At          time.Time
	Assigned    []Assignment
	Allocatable []string // device ids
}

// callTimeout bounds one call: the kubelet answers from memory.
const callTimeout = 10 * time.Second

// Read calls List and GetAllocatableResources and keeps NVIDIA's resources.
func (p *PodResources) Read(ctx context.Context, now time.Time) (Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	list, err := p.client.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return Snapshot{}, fmt.Errorf("kubelet pod-resources socket %s: List: %w", p.socket, err)
	}
	alloc, err := p.client.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	if err != nil {
		return Snapshot{}, fmt.Errorf("kubelet pod-resources socket %s: GetAllocatableResources: %w", p.socket, err)
	}
	s := Snapshot{At: now}
	for _, pod := range list.GetPodResources() {
		for _, c := range pod.GetContainers() {
			for _, d := range c.GetDevices() {
				if !nvidiaResource(d.GetResourceName()) {
					continue
				}
				for _, id := range d.GetDeviceIds() {
					s.Assigned = append(s.Assigned, Assignment{Namespace: pod.GetNamespace(), Pod: pod.GetName(), Container: c.GetName(),
						Resource: d.GetResourceName(), DeviceID: id})
				}
			}
		}
	}
	for _, d := range alloc.GetDevices() {
		if nvidiaResource(d.GetResourceName()) {
			s.Allocatable = append(s.Allocatable, d.GetDeviceIds()...)
		}
	}
	return s, nil
}
