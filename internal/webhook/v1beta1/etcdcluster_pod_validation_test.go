package v1beta1

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// withTemplate sets spec.podTemplate to t.
func withTemplate(t etcdv1beta1.PodTemplate) testutil.ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) { c.Spec.PodTemplate = &t }
}

// memory returns the resources of a container that requests req and is limited to limit.
func memory(req, limit string) *corev1.ResourceRequirements {
	return &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(req)},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)},
	}
}

// TestMemberPodRefusedAtAdmission: a spec whose members' pod the API server refuses (a dry run of its
// creation, through a real kube-apiserver's validation and admission plugins) is refused when it is
// applied, with the API server's reason, on create and on a change that restarts the members; a
// change that restarts nothing is not checked. Nothing is created by the check. (envtest's API
// server runs without the ServiceAccount admission plugin: the warning for a service account not
// created yet is TestPodCheckOf's and the end-to-end suite's.)
func TestMemberPodRefusedAtAdmission(t *testing.T) {
	k8s, w := newClient(t)
	ctx := context.Background()
	const refuses = "the API server refuses the pod this spec makes for each member"

	t.Run("invalid pod on create", func(t *testing.T) {
		for name, tmpl := range map[string]etcdv1beta1.PodTemplate{
			"request above limit":         {Resources: memory("2Gi", "1Gi")},
			"unknown toleration operator": {Tolerations: []corev1.Toleration{{Key: "k", Operator: "Maybe", Value: "v"}}},
		} {
			t.Run(name, func(t *testing.T) {
				c := newObject(withTemplate(tmpl))
				err := k8s.Create(ctx, c)
				denied(t, err, true, refuses, c.Name+"-0")
				if err != nil && !strings.Contains(err.Error(), `Pod "`+c.Name+`-0" is invalid: spec.`) {
					t.Errorf("%v: does not give the API server's reason", err)
				}
			})
		}
	})

	t.Run("invalid pod on update", func(t *testing.T) {
		c := create(t, k8s)
		err := update(k8s, c, withTemplate(etcdv1beta1.PodTemplate{Resources: memory("2Gi", "1Gi")}))
		denied(t, err, true, refuses, "must be less than or equal to memory limit of 1Gi")
		if ws := w.Take(); len(ws) != 0 {
			t.Errorf("a refused update warned %q", ws)
		}
	})

	// a LimitRange is enforced by admission (403 Forbidden), not by the pod's validation
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "limits-"}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, ns) })
	inNS := func(opts ...testutil.ClusterOption) *etcdv1beta1.EtcdCluster {
		c := newObject(opts...)
		c.Namespace = ns.Name
		return c
	}
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "max", Namespace: ns.Name}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}}}}}
	if err := k8s.Create(ctx, lr); err != nil {
		t.Fatal(err)
	}

	t.Run("refused by a LimitRange", func(t *testing.T) {
		c := inNS(withTemplate(etcdv1beta1.PodTemplate{Resources: memory("256Mi", "1Gi")}))
		denied(t, k8s.Create(ctx, c), true, refuses, "forbidden", "maximum memory usage per Container is 512Mi")
		fits := inNS(withTemplate(etcdv1beta1.PodTemplate{Resources: memory("256Mi", "512Mi")}))
		if err := k8s.Create(ctx, fits); err != nil {
			t.Fatalf("a pod within the LimitRange refused: %v", err)
		}
		// scaling restarts no member: not checked, even with a pod the LimitRange would now refuse
		lower := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "lower", Namespace: ns.Name}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}}}}}
		if err := k8s.Create(ctx, lower); err != nil {
			t.Fatal(err)
		}
		if err := update(k8s, fits, testutil.WithReplicas(5)); err != nil {
			t.Errorf("a change that restarts no member refused: %v", err)
		}
		err := update(k8s, fits, func(c *etcdv1beta1.EtcdCluster) { c.Spec.PodTemplate.Labels = map[string]string{"team": "a"} })
		denied(t, err, true, refuses, "maximum memory usage per Container is 256Mi")
	})

	t.Run("restricted namespace admits the members' pods", func(t *testing.T) {
		// the members' pods meet Pod Security's restricted level, so the check refuses no cluster there
		restricted := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "restricted-",
			Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
		if err := k8s.Create(ctx, restricted); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(ctx, restricted) })
		plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: restricted.Name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if err := k8s.Create(ctx, plain, client.DryRunAll); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity") {
			t.Fatalf("a pod without a security context: %v, want refused by Pod Security (is the plugin on?)", err)
		}
		w.Take()
		c := newObject()
		c.Namespace = restricted.Name
		if err := k8s.Create(ctx, c); err != nil {
			t.Fatalf("a cluster in a namespace that enforces the restricted Pod Security level refused: %v", err)
		}
		for _, m := range w.Take() {
			if strings.Contains(m, "PodSecurity") || strings.Contains(m, "pods") {
				t.Errorf("warned %q", m)
			}
		}
	})

	for _, namespace := range []string{"default", ns.Name} {
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(namespace)); err != nil || len(pods.Items) != 0 {
			t.Errorf("namespace %s: %d pods (%v), want none: the check is a dry run", namespace, len(pods.Items), err)
		}
	}
}

// TestRolloutBeyondQuotaWarnedAtAdmission: a change that restarts the members onto pods that ask for
// more cpu than the namespace's ResourceQuota has room for, once every member is rolled, is admitted
// with a warning that names the quota, its room and what the rollout needs, and says that no member is
// restarted until it has room; a change that fits is admitted without one. (envtest runs no quota
// controller: the test sets the quota's status.)
func TestRolloutBeyondQuotaWarnedAtAdmission(t *testing.T) {
	k8s, w := newClient(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "quota-"}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, ns) })
	c := newObject(withTemplate(etcdv1beta1.PodTemplate{Resources: &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}))
	c.Namespace = ns.Name
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	// the members' pods, as the API server holds them, each asking 100m
	for i := range 3 {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", c.Name, i), Namespace: ns.Name, Labels: resources.SelectorLabels(c)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "etcd", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}}
		if err := k8s.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	hard := corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("450m")}
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "compute", Namespace: ns.Name}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
	if err := k8s.Create(ctx, q); err != nil {
		t.Fatal(err)
	}
	q.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("300m")}}
	if err := k8s.Status().Update(ctx, q); err != nil {
		t.Fatal(err)
	}
	w.Take()
	cpu := func(req string) testutil.ClusterOption {
		return func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.PodTemplate.Resources.Requests[corev1.ResourceCPU] = resource.MustParse(req)
		}
	}

	if err := update(k8s, c, cpu("200m")); err != nil {
		t.Fatalf("a change beyond the quota refused: %v", err)
	}
	ws := quotaWarnings(w.Take())
	if len(ws) != 1 || !strings.Contains(ws[0], "The rolling update waits, with no member restarted, until the namespace's quota has room") ||
		!strings.Contains(ws[0], "ResourceQuota compute has room for requests.cpu 150m more (used 300m of 450m), and rolling 3 members onto the new spec needs up to 300m more") {
		t.Errorf("warnings %q, want one about the quota's room", ws)
	}
	if err := update(k8s, c, cpu("140m")); err != nil {
		t.Fatalf("a change within the quota refused: %v", err)
	}
	if ws := quotaWarnings(w.Take()); len(ws) != 0 {
		t.Errorf("a change within the quota warned %q", ws)
	}
}

// quotaWarnings are the warnings of ws that speak of a quota.
func quotaWarnings(ws []string) []string {
	var q []string
	for _, m := range ws {
		if strings.Contains(m, "quota") {
			q = append(q, m)
		}
	}
	return q
}
