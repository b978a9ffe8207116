package resources

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// ServedPodRecord returns the record of p, a member's pod that serves, to keep on the member's claim
// (etcdv1beta1.AnnotationServedPod) before a rolling update restarts the member onto a new spec: JSON of
// a pod with p's name, namespace, labels, annotations (without the operator's record of diverged data,
// which was about that pod's run) and owner references, and p's spec without the node it was bound to
// (the scheduler places the pod again; a volume bound to one node keeps it there) and without the
// priority admission set from its priority class. Errors only when
// the pod cannot be encoded.
func ServedPodRecord(p *corev1.Pod) (string, error) {
	rec := corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, Labels: maps.Clone(p.Labels), Annotations: maps.Clone(p.Annotations),
			OwnerReferences: p.OwnerReferences,
		},
		Spec: *p.Spec.DeepCopy(),
	}
	delete(rec.Annotations, etcdv1beta1.AnnotationDataDiverged)
	// admission fills these in from spec.priorityClassName again, and refuses a pod whose values differ
	// from the class's (changed since)
	rec.Spec.NodeName, rec.Spec.Priority, rec.Spec.PreemptionPolicy = "", nil, nil
	b, err := json.Marshal(&rec)
	if err != nil {
		return "", fmt.Errorf("encode the record of pod %s: %w", p.Name, err)
	}
	return string(b), nil
}

// PodFromServedRecord returns the pod to create from rec, a ServedPodRecord kept on the claim of
// member name of cluster c: the recorded pod, in c's namespace, named name (a record that names
// another pod is refused: a claim is never reassigned, so it was edited). Errors when rec does not
// decode, or names another pod.
func PodFromServedRecord(c *etcdv1beta1.EtcdCluster, name, rec string) (*corev1.Pod, error) {
	var p corev1.Pod
	if err := json.Unmarshal([]byte(rec), &p); err != nil {
		return nil, fmt.Errorf("decode the pod recorded in annotation %s: %w", etcdv1beta1.AnnotationServedPod, err)
	}
	if p.Name != name || (p.Namespace != "" && p.Namespace != c.Namespace) {
		return nil, fmt.Errorf("annotation %s records pod %s/%s, not %s/%s", etcdv1beta1.AnnotationServedPod, p.Namespace, p.Name, c.Namespace, name)
	}
	if p.Labels[etcdv1beta1.LabelCluster] != c.Name {
		return nil, fmt.Errorf("annotation %s records a pod not labelled as a member of %s (%s=%q)", etcdv1beta1.AnnotationServedPod, c.Name, etcdv1beta1.LabelCluster, p.Labels[etcdv1beta1.LabelCluster])
	}
	p.Namespace = c.Namespace
	p.Status = corev1.PodStatus{}
	p.ResourceVersion, p.UID = "", ""
	return &p, nil
}

// RestoredPod returns the pod to create for a member rolled back to recorded (PodFromServedRecord), a
// pod it served on: current, the pod the member gets from the current spec, with what a change of the
// spec that cannot run alters taken back from recorded: the etcd container's image, resources and
// the flags of spec.options (restoredArgs; the flags the operator owns stay current's), its probes
// (their paths follow the etcd version; one that runs a command is not taken), the
// pod's node selector, affinity, tolerations, topology spread constraints and priority class
// (spec.podTemplate), and the spec hash recorded on it. Everything else (volumes, init containers,
// security contexts, the service account, labels) is current's: the record is kept on a claim, which
// more users may edit than may create pods, so it never decides more of the pod than the
// EtcdCluster's own spec could.
func RestoredPod(current, recorded *corev1.Pod) *corev1.Pod {
	p := current.DeepCopy()
	p.Annotations = maps.Clone(p.Annotations)
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[etcdv1beta1.AnnotationSpecHash] = recorded.Annotations[etcdv1beta1.AnnotationSpecHash]
	p.Spec.NodeSelector = recorded.Spec.NodeSelector
	p.Spec.Affinity = recorded.Spec.Affinity
	p.Spec.Tolerations = recorded.Spec.Tolerations
	p.Spec.TopologySpreadConstraints = recorded.Spec.TopologySpreadConstraints
	p.Spec.PriorityClassName = recorded.Spec.PriorityClassName
	var from *corev1.Container
	for i := range recorded.Spec.Containers {
		if recorded.Spec.Containers[i].Name == EtcdContainer {
			from = &recorded.Spec.Containers[i]
		}
	}
	for i := range p.Spec.Containers {
		to := &p.Spec.Containers[i]
		if to.Name != EtcdContainer || from == nil {
			continue
		}
		to.Image, to.Resources = from.Image, *from.Resources.DeepCopy()
		to.Command = restoredArgs(to.Command, from.Command)
		// the probes' paths follow the etcd version (3.5 has no /livez); a probe that runs a command is
		// not taken from a record
		for _, pr := range []struct{ to, from **corev1.Probe }{{&to.StartupProbe, &from.StartupProbe}, {&to.LivenessProbe, &from.LivenessProbe}, {&to.ReadinessProbe, &from.ReadinessProbe}} {
			if *pr.from == nil || (*pr.from).Exec == nil {
				*pr.to = (*pr.from).DeepCopy()
			}
		}
	}
	return p
}

// restoredArgs returns the etcd command line cur (program, then "--flag=value" each) with the flags of
// spec.options taken from rec's instead: cur's program and the flags the operator owns
// (etcdv1beta1.ReservedFlag), then rec's other flags.
func restoredArgs(cur, rec []string) []string {
	if len(cur) == 0 {
		return cur
	}
	owned := func(arg string) bool {
		name, _, _ := strings.Cut(arg, "=")
		_, reserved := etcdv1beta1.ReservedFlag(name)
		return reserved || !strings.HasPrefix(arg, "--")
	}
	out := []string{cur[0]}
	for _, a := range cur[1:] {
		if owned(a) {
			out = append(out, a)
		}
	}
	for i, a := range rec {
		if i > 0 && !owned(a) {
			out = append(out, a)
		}
	}
	return out
}
