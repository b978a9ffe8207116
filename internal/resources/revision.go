package resources

import (
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// revisionData is what a revision keeps of a cluster's spec: the fields, besides the TLS settings,
// that SpecHash hashes and BuildPod builds the member pods from.
type revisionData struct {
	Version     string                   `json:"version,omitempty"`
	Image       string                   `json:"image,omitempty"`
	PodTemplate *etcdv1beta1.PodTemplate `json:"podTemplate,omitempty"`
	Options     *etcdv1beta1.EtcdOptions `json:"options,omitempty"`
}

// RevisionName returns the name of the ControllerRevision of cluster c for the spec of hash (SpecHash):
// "<cluster>-<hash>".
func RevisionName(c *etcdv1beta1.EtcdCluster, hash string) string { return c.Name + "-" + hash }

// Revision returns the ControllerRevision that keeps c's current spec, as far as the member pods are
// built from it (spec.version, image, podTemplate and options), so that a member can be rolled back to
// it once the spec has changed (SpecOfRevision): named RevisionName(c, SpecHash(c)), owned by c, with
// c's labels and the spec hash as label etcdv1beta1.LabelSpecHash; its revision number is c's
// generation. Only the operator writes it: Kubernetes' built-in roles let namespace editors read
// ControllerRevisions, not write them.
func (o Options) Revision(c *etcdv1beta1.EtcdCluster) *appsv1.ControllerRevision {
	hash := o.SpecHash(c)
	meta := ownedMeta(c, RevisionName(c, hash))
	meta.Labels[etcdv1beta1.LabelSpecHash] = hash
	b, _ := json.Marshal(revisionData{Version: c.Spec.Version, Image: c.Spec.Image, PodTemplate: c.Spec.PodTemplate, Options: c.Spec.Options})
	return &appsv1.ControllerRevision{ObjectMeta: meta, Data: runtime.RawExtension{Raw: b}, Revision: c.Generation}
}

// SpecOfRevision returns a copy of c with the spec fields rev keeps (see Revision) taken from rev: the
// cluster to build a member's pod from (BuildPod) to roll the member back to that spec. Errors when
// rev's data does not decode, or when the copy's SpecHash is not the one rev is labelled with (the TLS
// settings changed since, or the operator's default image repository did: such a pod would not be the
// one the member served on).
func (o Options) SpecOfRevision(c *etcdv1beta1.EtcdCluster, rev *appsv1.ControllerRevision) (*etcdv1beta1.EtcdCluster, error) {
	var d revisionData
	if err := json.Unmarshal(rev.Data.Raw, &d); err != nil {
		return nil, fmt.Errorf("decode controllerrevision %s: %w", rev.Name, err)
	}
	out := c.DeepCopy()
	out.Spec.Version, out.Spec.Image, out.Spec.PodTemplate, out.Spec.Options = d.Version, d.Image, d.PodTemplate, d.Options
	want := rev.Labels[etcdv1beta1.LabelSpecHash]
	if got := o.SpecHash(out); got != want {
		return nil, fmt.Errorf("controllerrevision %s builds pods of spec hash %s, not %s: the TLS settings changed since", rev.Name, got, want)
	}
	return out, nil
}
