package kubernetes

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// Pods is the node's pods as one client-go informer sees them: one list, then one watch
// (field selector spec.nodeName), so the API server is asked nothing per tick or per scrape.
type Pods struct {
	informer cache.SharedIndexInformer
	changed  chan struct{} // a pod was added, changed or deleted (coalesced)

	mu       sync.Mutex
	gone     map[string]*Gone // pod UID → its last state, for deletions seen since the last Take
	lastErr  error            // of the last list or watch call; nil once one succeeded
	requests map[string]int   // list, watch: calls made

	onRequest func(verb string, err error)
}

// NewPods watches the pods of node through client. onRequest, if set, is told of every list
// and watch call (for the metrics); it must not block.
func NewPods(client PodAPI, node string, onRequest func(verb string, err error)) *Pods {
	p := &Pods{changed: make(chan struct{}, 1), gone: map[string]*Gone{}, requests: map[string]int{}, onRequest: onRequest}
	selector := fields.OneTermEqualSelector("spec.nodeName", node).String()
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			l, err := client.List(context.Background(), o)
			p.request("list", err)
			return l, err
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			w, err := client.Watch(context.Background(), o)
			p.request("watch", err)
			return w, err
		},
	}
	// No resync: a resync re-delivers the cache, it does not ask the API server anything new.
	p.informer = cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	_, _ = p.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { p.notify() },
		UpdateFunc: func(any, any) { p.notify() },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				p.mu.Lock()
				p.gone[string(pod.UID)] = &Gone{Pod: pod, At: time.Now().UTC()}
				p.mu.Unlock()
			}
			p.notify()
		},
	})
	return p
}

func (p *Pods) request(verb string, err error) {
	p.mu.Lock()
	p.requests[verb]++
	p.lastErr = err
	p.mu.Unlock()
	if p.onRequest != nil {
		p.onRequest(verb, err)
	}
}

func (p *Pods) notify() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// Run runs the informer until ctx ends. It retries an unreachable API server by itself
// (client-go's backoff).
func (p *Pods) Run(ctx context.Context) { p.informer.Run(ctx.Done()) }

// Changed is signalled (coalesced) when a pod was added, changed or deleted.
func (p *Pods) Changed() <-chan struct{} { return p.changed }

// Synced says whether the first list has arrived: before it, no pod can be said to be gone.
func (p *Pods) Synced() bool { return p.informer.HasSynced() }

// Err is the error of the last list or watch call, nil when it succeeded.
func (p *Pods) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

// Requests is the number of list and watch calls made so far.
func (p *Pods) Requests() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.requests))
	for k, v := range p.requests {
		out[k] = v
	}
	return out
}

// List is the informer's pods by UID, from its cache.
func (p *Pods) List() map[string]*corev1.Pod {
	objs := p.informer.GetStore().List()
	out := make(map[string]*corev1.Pod, len(objs))
	for _, o := range objs {
		if pod, ok := o.(*corev1.Pod); ok {
			out[string(pod.UID)] = pod
		}
	}
	return out
}

// Gone is the pods seen deleted, by UID; Forget drops those no longer needed.
func (p *Pods) Gone() map[string]*Gone {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]*Gone, len(p.gone))
	for k, v := range p.gone {
		out[k] = v
	}
	return out
}

// Forget drops a deleted pod once its allocations are ended.
func (p *Pods) Forget(uid string) {
	p.mu.Lock()
	delete(p.gone, uid)
	p.mu.Unlock()
}
