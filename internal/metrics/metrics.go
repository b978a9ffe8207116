// Package metrics holds the operator's own Prometheus metrics, registered with controller-runtime's
// registry (served on the manager's metrics endpoint): etcd membership calls, Kubernetes API writes,
// automatic restores and backups.
package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// MembershipOperations counts the etcd membership calls the operator made on each cluster
	// (labels namespace and cluster, as the per-cluster series of cluster.go; ForgetCluster removes
	// them), by operation (add_learner, promote, remove, move_leader, update_peer_url) and result
	// (success, retry, error).
	MembershipOperations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcd_operator_membership_operations_total",
		Help: "etcd membership calls the operator made on the cluster, by operation and result.",
	}, []string{"namespace", "cluster", "operation", "result"})

	// APIWrites counts the operator's write requests to the Kubernetes API, by verb, kind and the
	// namespace of the object written ("" for one of no namespace). A subresource's write is
	// "<verb>/<subresource>" ("patch/status", "create/eviction"); a dry run, which writes nothing,
	// is "create/dry-run".
	APIWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcd_operator_api_writes_total",
		Help: "Write requests the operator sent to the Kubernetes API server, by verb, kind and namespace of the object (create/dry-run: a dry run, which writes nothing).",
	}, []string{"verb", "kind", "namespace"})

	// QuorumRestores counts the automatic restores after a quorum loss without data, by result
	// (started, succeeded).
	QuorumRestores = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcd_operator_quorum_loss_restores_total",
		Help: "Clusters recreated from a backup after a quorum loss without data (spec.recovery.restoreOnQuorumLoss), by result.",
	}, []string{"result"})
)

func init() {
	crmetrics.Registry.MustRegister(MembershipOperations, APIWrites, QuorumRestores)
}

// CountingClient wraps c so that every write it sends is counted in etcd_operator_api_writes_total.
func CountingClient(c client.Client) client.Client { return countingClient{c} }

type countingClient struct{ client.Client }

func (c countingClient) count(verb string, obj client.Object) {
	kind := "unknown"
	if gvk, err := apiutil.GVKForObject(obj, c.Scheme()); err == nil {
		kind = gvk.Kind
	}
	APIWrites.WithLabelValues(verb, kind, obj.GetNamespace()).Inc()
}

func (c countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	verb := "create"
	if o := (&client.CreateOptions{}).ApplyOptions(opts); len(o.DryRun) > 0 {
		verb = "create/dry-run"
	}
	c.count(verb, obj)
	return c.Client.Create(ctx, obj, opts...)
}

func (c countingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.count("update", obj)
	return c.Client.Update(ctx, obj, opts...)
}

func (c countingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.count("patch", obj)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c countingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.count("delete", obj)
	return c.Client.Delete(ctx, obj, opts...)
}

func (c countingClient) Status() client.SubResourceWriter {
	return countingStatus{SubResourceWriter: c.Client.Status(), c: c}
}

// SubResource counts the writes to a subresource (an eviction is a "create/eviction" of a Pod).
func (c countingClient) SubResource(sub string) client.SubResourceClient {
	return countingSubResource{SubResourceClient: c.Client.SubResource(sub), c: c, sub: sub}
}

type countingSubResource struct {
	client.SubResourceClient
	c   countingClient
	sub string
}

func (s countingSubResource) Create(ctx context.Context, obj client.Object, subResource client.Object, opts ...client.SubResourceCreateOption) error {
	s.c.count("create/"+s.sub, obj)
	return s.SubResourceClient.Create(ctx, obj, subResource, opts...)
}

func (s countingSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	s.c.count("update/"+s.sub, obj)
	return s.SubResourceClient.Update(ctx, obj, opts...)
}

func (s countingSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.c.count("patch/"+s.sub, obj)
	return s.SubResourceClient.Patch(ctx, obj, patch, opts...)
}

type countingStatus struct {
	client.SubResourceWriter
	c countingClient
}

func (s countingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	s.c.count("update/status", obj)
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

func (s countingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.c.count("patch/status", obj)
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// CountMembership records the result of one membership call on the cluster namespace/cluster.
func CountMembership(namespace, cluster, operation string, err error, transient bool) {
	result := "success"
	switch {
	case err != nil && transient:
		result = "retry"
	case err != nil:
		result = "error"
	}
	MembershipOperations.WithLabelValues(namespace, cluster, operation, result).Inc()
}
