package resources

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

func (o Options) dataVolume(c *etcdv1beta1.EtcdCluster, member string) corev1.Volume {
	if ed := c.Spec.Storage.EmptyDir; ed != nil {
		return corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: ed.DeepCopy()}}
	}
	return corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: PVCName(member)},
	}}
}

// DefaultStorageSize is the size of a member's volume when spec.storage.size is unset.
var DefaultStorageSize = resource.MustParse("1Gi")

// BuildPVC returns the PersistentVolumeClaim of member m, or nil when the cluster uses emptyDir.
// The claim records how the member was first started, so that a pod recreated on it gets the same flags.
// With retainPolicy Retain the claim has no owner, so that deleting the cluster keeps it.
func (o Options) BuildPVC(c *etcdv1beta1.EtcdCluster, m Member) *corev1.PersistentVolumeClaim {
	st := c.Spec.Storage
	if st.EmptyDir != nil {
		return nil
	}
	size := DefaultStorageSize
	if st.Size != nil {
		size = *st.Size
	}
	modes := st.AccessModes
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:      PVCName(m.Name),
			Namespace: c.Namespace,
			Labels:    MemberLabels(c, m.Name),
			Annotations: map[string]string{
				etcdv1beta1.AnnotationInitialClusterState: m.InitialClusterState,
				etcdv1beta1.AnnotationInitialCluster:      m.InitialCluster,
				etcdv1beta1.AnnotationClusterUID:          string(c.UID),
			},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      modes,
			StorageClassName: st.StorageClassName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	if m.AwaitAdd {
		pvc.Annotations[etcdv1beta1.AnnotationAwaitsAdd] = "true"
	}
	if st.RetainPolicy != etcdv1beta1.RetainPolicyRetain {
		pvc.OwnerReferences = []metav1.OwnerReference{OwnerReference(c)}
	}
	return pvc
}
