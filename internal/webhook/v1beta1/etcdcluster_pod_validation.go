package v1beta1

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/kube"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// MemberPods is how admission learns whether the API server accepts the pods a cluster's spec makes
// for its members: it creates one as a dry run (kube.CheckPod) through Client, from Build (the
// operator's resources.Options.AdmissionPod), with a deadline of memberPodTimeout. On a change that
// restarts the members, it also reads the members' pods and the namespace's ResourceQuotas through
// Reader (uncached; nil skips that check) to find whether the quotas have room for the whole rollout.
type MemberPods struct {
	Client client.Client
	Reader client.Reader
	Build  func(*etcdv1beta1.EtcdCluster) *corev1.Pod
}

// memberPodTimeout bounds the dry run, within the webhook's own 10 s.
const memberPodTimeout = 4 * time.Second

// validate refuses c when the API server refuses the pod its spec makes for a member: a pod that
// fails validation (a memory request above its limit, a toleration's unknown operator) or that
// admission forbids (Pod Security, a LimitRange, a ValidatingAdmissionPolicy, a policy webhook).
// Stored, such a spec would leave a new cluster without pods, and the rollout would hold a running
// cluster's members on the old spec (RolloutPaused) until it is fixed. What the API server refuses
// for now but may allow without the spec changing is a warning (a service account or priority class
// not created yet; a full ResourceQuota, on create only: on update the dry run counts the pod beside
// the member's own, which a restart deletes first). On update, a ResourceQuota without room for the
// pods of every member, each made after the member's pod is deleted, is a warning too
// (kube.QuotaShortfall): the rollout waits for room before it restarts any member. A dry run that
// cannot tell (a timeout, a pod webhook without dry-run support) admits c with a warning: the rollout
// checks each pod again.
func (p *MemberPods) validate(ctx context.Context, c *etcdv1beta1.EtcdCluster, create bool) (field.ErrorList, admission.Warnings) {
	ctx, cancel := context.WithTimeout(ctx, memberPodTimeout)
	defer cancel()
	pod := p.Build(c)
	check, err := kube.CheckPod(ctx, p.Client, pod)
	switch {
	case err != nil:
		return nil, admission.Warnings{fmt.Sprintf("The members' pods were not checked with the API server (a dry run of creating %s failed: %v); the operator checks each pod again before it restarts a member for the change", pod.Name, err)}
	case check.Unchecked != "":
		return nil, admission.Warnings{fmt.Sprintf("The members' pods were not checked with the API server (%s); the operator checks each pod again before it restarts a member for the change", check.Unchecked)}
	case check.Refused != "":
		return field.ErrorList{field.Forbidden(specPath, fmt.Sprintf(
			"the API server refuses the pod this spec makes for each member (a dry run of creating %s: %s): fix spec.podTemplate, spec.options, spec.image or spec.version, or the policy that refuses it",
			pod.Name, check.Refused))}, nil
	case check.NotNow != "" && !check.NamespaceTerminating && create:
		return nil, admission.Warnings{fmt.Sprintf("The API server refuses the members' pods for now (a dry run of creating %s: %s); the operator creates them once it allows them", pod.Name, check.NotNow)}
	case check.NotNow != "" && !check.NamespaceTerminating && !check.Quota:
		return nil, admission.Warnings{fmt.Sprintf("The API server refuses the members' pods for now (a dry run of creating %s: %s); the rolling update waits, with no member restarted, until it allows them", pod.Name, check.NotNow)}
	}
	if !create {
		if short := p.quotaShortfall(ctx, c, pod); short != "" {
			return nil, admission.Warnings{fmt.Sprintf("The rolling update waits, with no member restarted, until the namespace's quota has room (raise it, or lower spec.podTemplate.resources): %s", short)}
		}
	}
	return nil, nil
}

// quotaShortfall is kube.QuotaShortfall for replacing each running member pod of c with pod, the pod
// c's spec makes for its first member, which asks for what every member's asks for. It is "" when
// Reader is nil or cannot list them: the rollout checks the quotas again before each restart.
func (p *MemberPods) quotaShortfall(ctx context.Context, c *etcdv1beta1.EtcdCluster, pod *corev1.Pod) string {
	if p.Reader == nil {
		return ""
	}
	var pods corev1.PodList
	if err := p.Reader.List(ctx, &pods, client.InNamespace(c.Namespace), client.MatchingLabels(resources.SelectorLabels(c))); err != nil {
		return ""
	}
	var steps []kube.PodReplacement
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			steps = append(steps, kube.PodReplacement{Old: &pods.Items[i], New: pod})
		}
	}
	short, err := kube.QuotaShortfall(ctx, p.Reader, c.Namespace, steps)
	if err != nil {
		return ""
	}
	return short
}
