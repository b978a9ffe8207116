package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PodReplacement is one step of a rolling update: the pod it deletes (Old, as the API server holds
// it; nil when there is none) and the pod it then creates in its place (New, as built, before
// admission).
type PodReplacement struct {
	Old, New *corev1.Pod
}

// QuotaShortfall says which ResourceQuota of namespace ns would refuse one of the pods that steps
// creates, the steps made one after another in any order (each Old deleted, then its New created), and
// by how much: "" when every quota has room for each of them. For each resource a quota limits that a
// pod counts toward (cpu, memory, ephemeral-storage and hugepages requests, and extended resources;
// cpu, memory and ephemeral-storage limits), each step changes the quota's usage (status.used) by what
// its New counts minus what its Old counts, and the usage must stay within the quota's hard limit after
// every step, in the worst order (peakGrowth): a quota already below what the pods use refuses even a
// step that changes nothing. A pod counts as the API server's quota admission counts it (QuotaUsage),
// only where the pod is in the quota's scopes. New first gets the requests and limits that the API
// server's defaults and the namespace's LimitRanges would give its containers.
//
// A quota is skipped when status does not report the resource yet (the API server refuses every pod
// then, which the pod's dry run reports), or when it has a scope that cannot be told from the pods
// alone (only Terminating, NotTerminating, BestEffort, NotBestEffort, PriorityClass and
// CrossNamespacePodAffinity can). The error is that of listing the quotas or LimitRanges.
func QuotaShortfall(ctx context.Context, r client.Reader, ns string, steps []PodReplacement) (string, error) {
	if len(steps) == 0 {
		return "", nil
	}
	var quotas corev1.ResourceQuotaList
	if err := r.List(ctx, &quotas, client.InNamespace(ns)); err != nil {
		return "", fmt.Errorf("list ResourceQuotas in %s: %w", ns, err)
	}
	if len(quotas.Items) == 0 {
		return "", nil
	}
	var ranges corev1.LimitRangeList
	if err := r.List(ctx, &ranges, client.InNamespace(ns)); err != nil {
		return "", fmt.Errorf("list LimitRanges in %s: %w", ns, err)
	}
	sort.Slice(quotas.Items, func(i, j int) bool { return quotas.Items[i].Name < quotas.Items[j].Name })
	for i := range quotas.Items {
		if why := quotaShortfall(&quotas.Items[i], ranges.Items, steps); why != "" {
			return why, nil
		}
	}
	return "", nil
}

// quotaShortfall is QuotaShortfall for one quota q.
func quotaShortfall(q *corev1.ResourceQuota, ranges []corev1.LimitRange, steps []PodReplacement) string {
	// what each step changes the quota's usage by, once its old pod is deleted and its new pod made
	deltas := make([]corev1.ResourceList, 0, len(steps))
	for _, st := range steps {
		d := corev1.ResourceList{}
		if st.New != nil {
			if pod := WithDefaultResources(st.New, ranges); quotaCovers(q, pod) {
				addList(d, QuotaUsage(pod), 1)
			}
		}
		if st.Old != nil && countsTowardQuota(st.Old) && quotaCovers(q, st.Old) {
			addList(d, QuotaUsage(st.Old), -1)
		}
		deltas = append(deltas, d)
	}
	names := make([]string, 0, len(q.Status.Hard))
	for name := range q.Status.Hard {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, n := range names {
		name := corev1.ResourceName(n)
		peak, counted := peakGrowth(deltas, name)
		used, known := q.Status.Used[name]
		if !counted || !known {
			continue
		}
		hard := q.Status.Hard[name]
		after := used.DeepCopy()
		after.Add(peak)
		if after.Cmp(hard) <= 0 {
			continue
		}
		if peak.Sign() <= 0 {
			return fmt.Sprintf("ResourceQuota %s allows %s %s and %s is used already (the quota is below what the pods use): a member's pod deleted for the rolling update could not be made again",
				q.Name, name, hard.String(), used.String())
		}
		room := hard.DeepCopy()
		room.Sub(used)
		if room.Sign() < 0 {
			room = resource.Quantity{}
		}
		return fmt.Sprintf("ResourceQuota %s has room for %s %s more (used %s of %s), and rolling %s onto the new spec needs up to %s more",
			q.Name, name, room.String(), used.String(), hard.String(), members(len(steps)), peak.String())
	}
	return ""
}

// peakGrowth returns the most that the usage of resource name can have grown by after one of the
// steps of deltas or more, whatever order they are taken in, and whether any step counts name: the sum
// of the steps that grow it, or, when none does, the change of the step that shrinks it least. The
// rollout's order (followers first, the leader last) depends on which member leads by then.
func peakGrowth(deltas []corev1.ResourceList, name corev1.ResourceName) (resource.Quantity, bool) {
	var sum, least resource.Quantity
	grows, counted := false, false
	for _, d := range deltas {
		q, ok := d[name]
		if !ok {
			continue
		}
		if !counted || q.Cmp(least) > 0 {
			least = q.DeepCopy()
		}
		counted = true
		if q.Sign() > 0 {
			sum.Add(q)
			grows = true
		}
	}
	if grows {
		return sum, true
	}
	return least, counted
}

// members says "1 member" or "n members".
func members(n int) string {
	if n == 1 {
		return "1 member"
	}
	return fmt.Sprintf("%d members", n)
}

// QuotaUsage returns what pod counts toward a ResourceQuota, by quota resource name, as the API
// server's pod quota evaluator counts it: one of pods and count/pods; its requests (as the kubelet sums
// them: init containers, sidecars and overhead included; k8s.io/component-helpers) as cpu and
// requests.cpu (likewise memory, ephemeral-storage, and hugepages-<size>), extended resources as
// requests.<name>; and its limits as limits.cpu, limits.memory and limits.ephemeral-storage.
func QuotaUsage(pod *corev1.Pod) corev1.ResourceList {
	usage := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1"), "count/pods": resource.MustParse("1")}
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	for name, q := range requests {
		switch {
		case name == corev1.ResourceCPU || name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage:
			usage[name] = q.DeepCopy()
			usage[corev1.ResourceName("requests."+string(name))] = q.DeepCopy()
		case strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
			usage[name] = q.DeepCopy()
			usage[corev1.ResourceName("requests."+string(name))] = q.DeepCopy()
		case strings.Contains(string(name), "/") && !strings.HasPrefix(string(name), "kubernetes.io/"):
			// an extended resource: quota counts it as requests.<name> only
			usage[corev1.ResourceName("requests."+string(name))] = q.DeepCopy()
		}
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		if q, ok := limits[name]; ok {
			usage[corev1.ResourceName("limits."+string(name))] = q.DeepCopy()
		}
	}
	return usage
}

// WithDefaultResources returns a copy of pod whose containers (init containers included) have the
// requests and limits the API server gives them on creation: a request a container leaves out is its
// limit, when it sets one (the API server's defaulting); then what is still missing is the default
// request and default limit of the Container items of ranges (the LimitRanger admission plugin).
func WithDefaultResources(pod *corev1.Pod, ranges []corev1.LimitRange) *corev1.Pod {
	pod = pod.DeepCopy()
	fill := func(c *corev1.Container) {
		for name, q := range c.Resources.Limits {
			if _, ok := c.Resources.Requests[name]; !ok {
				if c.Resources.Requests == nil {
					c.Resources.Requests = corev1.ResourceList{}
				}
				c.Resources.Requests[name] = q.DeepCopy()
			}
		}
		for _, lr := range ranges {
			for _, item := range lr.Spec.Limits {
				if item.Type != corev1.LimitTypeContainer {
					continue
				}
				c.Resources.Requests = withMissing(c.Resources.Requests, item.DefaultRequest)
				c.Resources.Limits = withMissing(c.Resources.Limits, item.Default)
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		fill(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		fill(&pod.Spec.Containers[i])
	}
	return pod
}

// withMissing returns list with the entries of defaults it lacks added (list itself, or a new list
// when list is nil and there is something to add).
func withMissing(list, defaults corev1.ResourceList) corev1.ResourceList {
	for name, q := range defaults {
		if _, ok := list[name]; ok {
			continue
		}
		if list == nil {
			list = corev1.ResourceList{}
		}
		list[name] = q.DeepCopy()
	}
	return list
}

// addList adds sign times each entry of add to sum.
func addList(sum, add corev1.ResourceList, sign int) {
	for name, q := range add {
		cur := sum[name]
		if sign < 0 {
			cur.Sub(q)
		} else {
			cur.Add(q)
		}
		sum[name] = cur
	}
}

// countsTowardQuota reports whether the API server's quota counts pod: it has not finished (phase
// Succeeded or Failed) and is not being deleted. (The API server also counts a pod being deleted until
// its grace period ends; leaving it out can only find less room than there is.)
func countsTowardQuota(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// quotaCovers reports whether pod is in the scopes of q (every quota without scopes covers every pod).
// A scope that cannot be told from the pod alone covers no pod.
func quotaCovers(q *corev1.ResourceQuota, pod *corev1.Pod) bool {
	for _, scope := range q.Spec.Scopes {
		if !inScope(pod, corev1.ScopedResourceSelectorRequirement{ScopeName: scope, Operator: corev1.ScopeSelectorOpExists}) {
			return false
		}
	}
	if q.Spec.ScopeSelector != nil {
		for _, req := range q.Spec.ScopeSelector.MatchExpressions {
			if !inScope(pod, req) {
				return false
			}
		}
	}
	return true
}

// inScope reports whether pod matches one scope requirement of a quota, as the API server's pod quota
// evaluator matches it.
func inScope(pod *corev1.Pod, req corev1.ScopedResourceSelectorRequirement) bool {
	switch req.ScopeName {
	case corev1.ResourceQuotaScopeTerminating:
		return pod.Spec.ActiveDeadlineSeconds != nil && *pod.Spec.ActiveDeadlineSeconds >= 0
	case corev1.ResourceQuotaScopeNotTerminating:
		return pod.Spec.ActiveDeadlineSeconds == nil || *pod.Spec.ActiveDeadlineSeconds < 0
	case corev1.ResourceQuotaScopeBestEffort:
		return bestEffort(pod)
	case corev1.ResourceQuotaScopeNotBestEffort:
		return !bestEffort(pod)
	case corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return crossNamespaceAffinity(pod)
	case corev1.ResourceQuotaScopePriorityClass:
		name := pod.Spec.PriorityClassName
		switch req.Operator {
		case corev1.ScopeSelectorOpExists:
			return name != ""
		case corev1.ScopeSelectorOpDoesNotExist:
			return name == ""
		case corev1.ScopeSelectorOpIn:
			return contains(req.Values, name)
		case corev1.ScopeSelectorOpNotIn:
			return !contains(req.Values, name)
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// bestEffort reports whether pod is of the BestEffort QoS class: no container sets a cpu or memory
// request or limit.
func bestEffort(pod *corev1.Pod) bool {
	if pod.Spec.Resources != nil && (len(pod.Spec.Resources.Requests) > 0 || len(pod.Spec.Resources.Limits) > 0) {
		return false
	}
	all := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range all {
		for _, list := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
			for name := range list {
				if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
					return false
				}
			}
		}
	}
	return true
}

// crossNamespaceAffinity reports whether a pod (anti-)affinity term of pod names namespaces or a
// namespace selector.
func crossNamespaceAffinity(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil {
		return false
	}
	var terms []corev1.PodAffinityTerm
	if a.PodAffinity != nil {
		terms = append(terms, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	if a.PodAntiAffinity != nil {
		terms = append(terms, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	for _, t := range terms {
		if len(t.Namespaces) > 0 || t.NamespaceSelector != nil {
			return true
		}
	}
	return false
}
