package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// memberPod is a pod shaped like a member's: an init container and the etcd container, with the
// given cpu request of etcd ("" for none) and memory limit ("" for none).
func memberPod(cpu, memLimit string) *corev1.Pod {
	etcd := corev1.Container{Name: "etcd"}
	if cpu != "" {
		etcd.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	}
	if memLimit != "" {
		etcd.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memLimit)}
	}
	return &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "verify-data", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")},
		}}},
		Containers: []corev1.Container{etcd},
	}}
}

func quota(name string, hard, used corev1.ResourceList) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     corev1.ResourceQuotaStatus{Hard: hard, Used: used},
	}
}

func list(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// TestQuotaUsage: a pod counts once as a pod, and its requests (the larger of its init containers' and the sum of its
// containers') under both cpu and requests.cpu, its limits under limits.*, hugepages under both
// names, and an extended resource as requests.<name> only, as the API server's quota does.
func TestQuotaUsage(t *testing.T) {
	pod := memberPod("300m", "1Gi")
	pod.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("256Mi")
	pod.Spec.Containers[0].Resources.Requests["hugepages-2Mi"] = resource.MustParse("4Mi")
	pod.Spec.Containers[0].Resources.Requests["example.com/gpu"] = resource.MustParse("1")
	pod.Spec.InitContainers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("500m")
	got := QuotaUsage(pod)
	want := list("pods", "1", "count/pods", "1", "cpu", "500m", "requests.cpu", "500m", "memory", "256Mi", "requests.memory", "256Mi",
		"limits.memory", "1Gi", "hugepages-2Mi", "4Mi", "requests.hugepages-2Mi", "4Mi", "requests.example.com/gpu", "1")
	if len(got) != len(want) {
		t.Errorf("usage %v, want %v", got, want)
	}
	for name, q := range want {
		if g, ok := got[name]; !ok || g.Cmp(q) != 0 {
			t.Errorf("%s: %v, want %v", name, got[name], q.String())
		}
	}
}

// TestWithDefaultResources: a request left out is the container's own limit first, then a
// LimitRange's default request; a limit left out is a LimitRange's default; what a container sets is
// kept; the pod given is not changed.
func TestWithDefaultResources(t *testing.T) {
	pod := memberPod("300m", "1Gi")
	ranges := []corev1.LimitRange{{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypePod, Default: list("cpu", "9")}, // pod items give no defaults
		{Type: corev1.LimitTypeContainer, Default: list("cpu", "1", "memory", "512Mi"), DefaultRequest: list("cpu", "200m", "memory", "128Mi")},
	}}}}
	got := WithDefaultResources(pod, ranges)
	etcd := got.Spec.Containers[0].Resources
	for _, tc := range []struct {
		what string
		got  resource.Quantity
		want string
	}{
		{"etcd cpu request (its own)", etcd.Requests[corev1.ResourceCPU], "300m"},
		{"etcd memory request (its limit)", etcd.Requests[corev1.ResourceMemory], "1Gi"},
		{"etcd memory limit (its own)", etcd.Limits[corev1.ResourceMemory], "1Gi"},
		{"etcd cpu limit (default)", etcd.Limits[corev1.ResourceCPU], "1"},
		{"init memory request (default request)", got.Spec.InitContainers[0].Resources.Requests[corev1.ResourceMemory], "128Mi"},
		{"init memory limit (default)", got.Spec.InitContainers[0].Resources.Limits[corev1.ResourceMemory], "512Mi"},
	} {
		if tc.got.Cmp(resource.MustParse(tc.want)) != 0 {
			t.Errorf("%s: %s, want %s", tc.what, tc.got.String(), tc.want)
		}
	}
	if _, changed := pod.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory]; changed {
		t.Error("the pod given was changed")
	}
}

// TestQuotaShortfall: replacing pods one after another needs room, after every step in the worst
// order, for what the steps that grow add up to; a quota below what the pods use already refuses even
// steps that change nothing, or that shrink too little; a quota with room, one whose usage is not known
// yet, or a spec that shrinks within the quota says nothing.
func TestQuotaShortfall(t *testing.T) {
	steps := func(cpu ...string) []PodReplacement {
		var out []PodReplacement
		for i := 0; i < len(cpu); i += 2 {
			out = append(out, PodReplacement{Old: memberPod(cpu[i], ""), New: memberPod(cpu[i+1], "")})
		}
		return out
	}
	three := func(oldCPU, newCPU string) []PodReplacement {
		return steps(oldCPU, newCPU, oldCPU, newCPU, oldCPU, newCPU)
	}
	for _, tc := range []struct {
		name  string
		q     *corev1.ResourceQuota
		steps []PodReplacement
		want  string // a part of the message, "" for room
	}{
		{name: "room for all three", q: quota("compute", list("requests.cpu", "1"), list("requests.cpu", "300m")), steps: three("100m", "300m")},
		{name: "room for two of three", q: quota("compute", list("requests.cpu", "1"), list("requests.cpu", "600m")), steps: three("200m", "400m"),
			want: "ResourceQuota compute has room for requests.cpu 400m more (used 600m of 1), and rolling 3 members onto the new spec needs up to 600m more"},
		{name: "cpu, not requests.cpu", q: quota("compute", list("cpu", "700m"), list("cpu", "600m")), steps: three("200m", "250m"),
			want: "cpu 100m more"},
		{name: "a spec that shrinks", q: quota("compute", list("requests.cpu", "1"), list("requests.cpu", "1")), steps: three("300m", "100m")},
		// members at 400m, 200m, 200m onto 300m: +100m in all, but the two that grow may go first
		{name: "the growing steps first", q: quota("late", list("requests.cpu", "900m"), list("requests.cpu", "800m")), steps: steps("400m", "300m", "200m", "300m", "200m", "300m"),
			want: "ResourceQuota late has room for requests.cpu 100m more (used 800m of 900m), and rolling 3 members onto the new spec needs up to 200m more"},
		{name: "a quota lowered below the pods, a label change", q: quota("compute", list("requests.cpu", "500m"), list("requests.cpu", "600m")), steps: three("200m", "200m"),
			want: "ResourceQuota compute allows requests.cpu 500m and 600m is used already"},
		{name: "a quota lowered below the pods, a spec that shrinks too little", q: quota("compute", list("requests.cpu", "500m"), list("requests.cpu", "900m")), steps: three("300m", "100m"),
			want: "ResourceQuota compute allows requests.cpu 500m and 900m is used already"},
		{name: "a quota lowered below the pods, a spec that shrinks enough", q: quota("compute", list("requests.cpu", "800m"), list("requests.cpu", "900m")), steps: three("300m", "100m")},
		{name: "pods: exactly full", q: quota("count", list("pods", "3"), list("pods", "3")), steps: three("100m", "300m")},
		{name: "pods: over", q: quota("count", list("pods", "3"), list("pods", "4")), steps: three("100m", "100m"), want: "ResourceQuota count allows pods 3 and 4 is used already"},
		{name: "usage not known yet", q: quota("compute", list("requests.cpu", "1"), nil), steps: three("100m", "900m")},
		{name: "no old pod: the new one counts whole", q: quota("compute", list("requests.cpu", "1"), list("requests.cpu", "800m")),
			steps: []PodReplacement{{New: memberPod("300m", "")}}, want: "rolling 1 member onto the new spec needs up to 300m more"},
		{name: "old pod being deleted counts nothing", q: quota("compute", list("requests.cpu", "1"), list("requests.cpu", "800m")),
			steps: func() []PodReplacement {
				old := memberPod("300m", "")
				old.DeletionTimestamp = &metav1.Time{}
				return []PodReplacement{{Old: old, New: memberPod("300m", "")}}
			}(), want: "needs up to 300m more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := quotaShortfall(tc.q, nil, tc.steps)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("%q, want %q", got, tc.want)
			}
		})
	}
}

// TestQuotaShortfallScopes: a quota counts only the pods in its scopes, as the API server's pod quota
// evaluator matches them.
func TestQuotaShortfallScopes(t *testing.T) {
	critical := memberPod("500m", "")
	critical.Spec.PriorityClassName = "etcd-critical"
	plain := memberPod("500m", "")
	bestEffort := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd"}}}}
	deadline := memberPod("500m", "")
	deadline.Spec.ActiveDeadlineSeconds = ptr.To[int64](60)
	crossNS := memberPod("500m", "")
	crossNS.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "x", Namespaces: []string{"other"}},
		}},
	}}
	for _, tc := range []struct {
		name   string
		scopes []corev1.ResourceQuotaScope
		sel    []corev1.ScopedResourceSelectorRequirement
		pod    *corev1.Pod
		covers bool
	}{
		{name: "no scope", pod: plain, covers: true},
		{name: "NotTerminating", scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating}, pod: plain, covers: true},
		{name: "Terminating", scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating}, pod: plain},
		{name: "Terminating, with a deadline", scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating}, pod: deadline, covers: true},
		{name: "BestEffort", scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}, pod: plain},
		{name: "BestEffort, best effort pod", scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}, pod: bestEffort, covers: true},
		{name: "NotBestEffort", scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotBestEffort}, pod: plain, covers: true},
		{name: "PriorityClass In", sel: []corev1.ScopedResourceSelectorRequirement{{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"etcd-critical"}}}, pod: critical, covers: true},
		{name: "PriorityClass In, other class", sel: []corev1.ScopedResourceSelectorRequirement{{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}}}, pod: critical},
		{name: "PriorityClass NotIn", sel: []corev1.ScopedResourceSelectorRequirement{{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpNotIn, Values: []string{"high"}}}, pod: critical, covers: true},
		{name: "PriorityClass Exists, none", sel: []corev1.ScopedResourceSelectorRequirement{{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpExists}}, pod: plain},
		{name: "PriorityClass DoesNotExist, none", sel: []corev1.ScopedResourceSelectorRequirement{{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpDoesNotExist}}, pod: plain, covers: true},
		{name: "CrossNamespacePodAffinity", scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeCrossNamespacePodAffinity}, pod: plain},
		{name: "CrossNamespacePodAffinity, with a namespace", scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeCrossNamespacePodAffinity}, pod: crossNS, covers: true},
		{name: "scopes are ANDed", scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating, corev1.ResourceQuotaScopeBestEffort}, pod: plain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := quota("scoped", list("requests.cpu", "1", "requests.memory", "1Gi"), list("requests.cpu", "900m", "requests.memory", "0"))
			q.Spec.Scopes = tc.scopes
			if tc.sel != nil {
				q.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: tc.sel}
			}
			if got := quotaCovers(q, tc.pod); got != tc.covers {
				t.Fatalf("covers %v, want %v", got, tc.covers)
			}
			// a pod in scope that adds 500m cpu is refused; one out of scope is not counted
			got := quotaShortfall(q, nil, []PodReplacement{{New: tc.pod}})
			if tc.covers && tc.pod != bestEffort && got == "" || !tc.covers && got != "" {
				t.Errorf("shortfall %q, covers %v", got, tc.covers)
			}
		})
	}
}
