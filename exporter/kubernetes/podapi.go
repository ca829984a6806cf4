package kubernetes

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// PodAPI is all the discovery asks of the API server: to list pods and to watch them. A
// typed client's Pods(metav1.NamespaceAll) satisfies it too (the tests' fake clientset).
type PodAPI interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// restPods is PodAPI over a REST client that knows the core/v1 group alone. Why not
// client-go's clientset: it registers every API group's types and typed clients, which is
// most of the exporter's build time (and of a GPU node's binary) for two calls on pods.
type restPods struct {
	client rest.Interface
	params runtime.ParameterCodec
}

// newRESTPods is a PodAPI of the API server that cfg describes; it does not connect.
func newRESTPods(cfg *rest.Config) (*restPods, error) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering the core/v1 types: %w", err)
	}
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.APIPath = "/api"
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	client, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	return &restPods{client: client, params: runtime.NewParameterCodec(scheme)}, nil
}

func (p *restPods) List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	var list corev1.PodList
	err := p.client.Get().Resource("pods").VersionedParams(&opts, p.params).Do(ctx).Into(&list)
	if err != nil {
		return nil, err
	}
	return &list, nil
}

func (p *restPods) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	req := p.client.Get().Resource("pods").VersionedParams(&opts, p.params)
	if opts.TimeoutSeconds != nil {
		req = req.Timeout(time.Duration(*opts.TimeoutSeconds) * time.Second)
	}
	return req.Watch(ctx)
}
