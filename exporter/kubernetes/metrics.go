package kubernetes

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the discovery's own series; every counter exists from the start at 0.
type metrics struct {
	up            *prometheus.GaugeVec
	requests      *prometheus.CounterVec
	unmapped      prometheus.Counter
	published     prometheus.Counter
	publishErrors prometheus.Counter
	refused       *prometheus.CounterVec
	corruptState  prometheus.Counter
	podInfo       *prometheus.Desc
	d             *Discovery
}

func newMetrics(reg prometheus.Registerer, d *Discovery) *metrics {
	m := &metrics{
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slicemeter_exporter_kubernetes_up",
			Help: "Whether the last refresh reached the kubelet's PodResources API (source=kubelet) and the API server (source=apiserver)."}, []string{"source"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "slicemeter_exporter_kubernetes_api_requests_total",
			Help: "Calls to the API server by verb (list, watch) and result (ok, error): one list and one long watch at a time, never polling."}, []string{"verb", "result"}),
		unmapped: prometheus.NewCounter(prometheus.CounterOpts{Name: "slicemeter_exporter_kubernetes_unmapped_devices_total",
			Help: "NVIDIA device ids the kubelet assigned that map to no instance (each is named once in the log), counted per refresh."}),
		published: prometheus.NewCounter(prometheus.CounterOpts{Name: "slicemeter_exporter_kubernetes_allocations_published_total",
			Help: "Allocation events published to the allocations topic."}),
		publishErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "slicemeter_exporter_kubernetes_publish_errors_total",
			Help: "Refreshes whose allocation events Kafka did not take (they are sent again at the next refresh)."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "slicemeter_exporter_kubernetes_allocations_refused_total",
			Help: "Allocations of pods refused and dead-lettered with the reason, by field: the validator's (e.g. tenant: a namespace or label that is not a tenant name), or instance_id: the instance is held by another container at the same time (a time-sliced MIG device in several pods)."}, []string{"field"}),
		corruptState: prometheus.NewCounter(prometheus.CounterOpts{Name: "slicemeter_exporter_kubernetes_state_corrupt_total",
			Help: "State files found corrupt at start (empty, truncated, not JSON): moved aside to <file>.corrupt-<time> and the discovery started empty."}),
		podInfo: prometheus.NewDesc("slicemeter_instance_pod_info",
			"1 for each instance a running container holds, with its pod: join on node and slice to label any instance series with namespace, pod and container.",
			append([]string{"node", "slice", "kind"}, podLabels...), nil),
		d: d,
	}
	for _, s := range []string{"kubelet", "apiserver"} {
		m.up.WithLabelValues(s)
	}
	for _, v := range []string{"list", "watch"} {
		for _, r := range []string{"ok", "error"} {
			m.requests.WithLabelValues(v, r)
		}
	}
	for _, f := range []string{"tenant", "tier", fieldInstance} {
		m.refused.WithLabelValues(f)
	}
	if reg != nil {
		reg.MustRegister(m.up, m.requests, m.unmapped, m.published, m.publishErrors, m.refused, m.corruptState, m)
	}
	return m
}

func (m *metrics) request(verb string, err error) {
	r := "ok"
	if err != nil {
		r = "error"
	}
	m.requests.WithLabelValues(verb, r).Inc()
}

// Describe and Collect serve the pod info series from the last refresh's view.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) { ch <- m.podInfo }

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	for _, h := range m.d.view.Load().running {
		ch <- prometheus.MustNewConstMetric(m.podInfo, prometheus.GaugeValue, 1, holdingLabels(m.d.f.NodeName, h)...)
	}
}
