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
)

// MemberPods is how admission learns whether the API server accepts the pods a cluster's spec makes
// for its members: it creates one as a dry run (kube.CheckPod) through Client, from Build (the
// operator's resources.Options.AdmissionPod), with a deadline of memberPodTimeout.
type MemberPods struct {
	Client client.Client
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
// the member's own, which a restart deletes first). A dry run that cannot tell (a timeout, a pod webhook without dry-run
// support) admits c with a warning: the rollout checks each pod again.
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
	return nil, nil
}
