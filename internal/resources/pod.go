package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
)

// Initial cluster states of a member, as etcd's --initial-cluster-state takes them.
const (
	StateNew      = "new"
	StateExisting = "existing"
)

// nonRootID is the user and group the etcd container runs as.
const nonRootID = 65532

// Member is how one member is to be started: its name and the --initial-cluster flags its data
// directory is created with. etcd reads the initial-cluster flags only when the data directory is
// empty; a member restarted on its own data ignores them.
type Member struct {
	// Name is the member's name and its pod's name.
	Name string
	// InitialClusterState is StateNew for members of the initial bootstrap and StateExisting for a
	// member added to a running cluster.
	InitialClusterState string
	// InitialCluster is the --initial-cluster value: "name=peerURL,..." of every member the new member
	// must know, itself included.
	InitialCluster string
	// Restore, for a member of the initial bootstrap of a cluster created from a backup, is the
	// snapshot its data directory is restored from by an init container before etcd first starts.
	Restore *RestorePlan
}

// OwnerReference makes cluster c the controller of an object.
func OwnerReference(c *etcdv1alpha1.EtcdCluster) metav1.OwnerReference {
	return *metav1.NewControllerRef(c, etcdv1alpha1.GroupVersion.WithKind("EtcdCluster"))
}

// EtcdArgs returns the etcd command line of member m (exec form: the image has no shell): the flags the
// operator owns, then spec.options (typed fields, then extraArgs sorted by name; reserved flags in
// extraArgs are dropped, admission refuses them).
func (o Options) EtcdArgs(c *etcdv1alpha1.EtcdCluster, m Member) []string {
	return append(o.ownedArgs(c, m), optionArgs(c.Spec.Options)...)
}

// optionArgs returns the flags of spec.options.
func optionArgs(opts *etcdv1alpha1.EtcdOptions) []string {
	if opts == nil {
		return nil
	}
	var args []string
	if q := opts.QuotaBackendBytes; q != nil {
		args = append(args, "--quota-backend-bytes="+strconv.FormatInt(q.Value(), 10))
	}
	if opts.AutoCompactionMode != "" {
		args = append(args, "--auto-compaction-mode="+string(opts.AutoCompactionMode))
	}
	if opts.AutoCompactionRetention != "" {
		args = append(args, "--auto-compaction-retention="+opts.AutoCompactionRetention)
	}
	if v := opts.SnapshotCount; v != nil {
		args = append(args, "--snapshot-count="+strconv.FormatInt(*v, 10))
	}
	if v := opts.HeartbeatIntervalMillis; v != nil {
		args = append(args, "--heartbeat-interval="+strconv.Itoa(int(*v)))
	}
	if v := opts.ElectionTimeoutMillis; v != nil {
		args = append(args, "--election-timeout="+strconv.Itoa(int(*v)))
	}
	if v := opts.MaxRequestBytes; v != nil {
		args = append(args, "--max-request-bytes="+strconv.Itoa(int(*v)))
	}
	for _, k := range slices.Sorted(maps.Keys(opts.ExtraArgs)) {
		if _, reserved := etcdv1alpha1.ReservedFlag(k); reserved {
			continue
		}
		args = append(args, "--"+k+"="+opts.ExtraArgs[k])
	}
	return args
}

// ownedArgs returns the flags the operator decides for member m.
func (o Options) ownedArgs(c *etcdv1alpha1.EtcdCluster, m Member) []string {
	return []string{
		"/usr/local/bin/etcd",
		"--name=" + m.Name,
		"--data-dir=" + DataDir,
		"--listen-peer-urls=http://0.0.0.0:2380",
		"--listen-client-urls=http://0.0.0.0:2379",
		"--listen-metrics-urls=http://0.0.0.0:2381",
		"--advertise-client-urls=" + o.ClientURL(c, m.Name),
		"--initial-advertise-peer-urls=" + o.PeerURL(c, m.Name),
		"--initial-cluster=" + m.InitialCluster,
		"--initial-cluster-state=" + m.InitialClusterState,
		"--initial-cluster-token=" + clusterToken(c, m),
	}
}

// BuildPod returns the pod of member m. The pod's hostname and subdomain give it the DNS name its peer
// URL names, through the headless peer Service.
func (o Options) BuildPod(c *etcdv1alpha1.EtcdCluster, m Member) *corev1.Pod {
	tmpl := c.Spec.PodTemplate
	if tmpl == nil {
		tmpl = &etcdv1alpha1.PodTemplate{}
	}
	labels := map[string]string{}
	maps.Copy(labels, tmpl.Labels)
	maps.Copy(labels, MemberLabels(c, m.Name)) // ours win: selectors depend on them
	annotations := map[string]string{}
	maps.Copy(annotations, tmpl.Annotations)
	annotations[etcdv1alpha1.AnnotationInitialClusterState] = m.InitialClusterState
	annotations[etcdv1alpha1.AnnotationSpecHash] = o.SpecHash(c)

	affinity := tmpl.Affinity.DeepCopy()
	if affinity == nil {
		affinity = defaultAffinity(c)
	}
	spread := tmpl.TopologySpreadConstraints
	if spread == nil {
		spread = []corev1.TopologySpreadConstraint{{
			MaxSkew:           1,
			TopologyKey:       corev1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector:     &metav1.LabelSelector{MatchLabels: SelectorLabels(c)},
		}}
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            m.Name,
			Namespace:       c.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{OwnerReference(c)},
		},
		Spec: corev1.PodSpec{
			Hostname:                     m.Name,
			Subdomain:                    PeerServiceName(c),
			EnableServiceLinks:           ptr.To(false),
			AutomountServiceAccountToken: ptr.To(false),
			RestartPolicy:                corev1.RestartPolicyAlways,
			Affinity:                     affinity,
			TopologySpreadConstraints:    spread,
			Tolerations:                  tmpl.Tolerations,
			NodeSelector:                 tmpl.NodeSelector,
			PriorityClassName:            tmpl.PriorityClassName,
			ServiceAccountName:           tmpl.ServiceAccountName,
			SecurityContext:              restrictedPod(),
			Containers:                   []corev1.Container{o.etcdContainer(c, m, tmpl)},
			Volumes:                      []corev1.Volume{o.dataVolume(c, m.Name)},
		},
	}
	if m.Restore != nil {
		init, vols := o.restoreInitContainer(c, m, m.Restore)
		pod.Spec.InitContainers = []corev1.Container{init}
		pod.Spec.Volumes = append(pod.Spec.Volumes, vols...)
	}
	return pod
}

// etcdContainer returns the etcd container of member m: its command, ports, resources (the
// template's, or a small default request) and probes.
func (o Options) etcdContainer(c *etcdv1alpha1.EtcdCluster, m Member, tmpl *etcdv1alpha1.PodTemplate) corev1.Container {
	resources := corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("100m"),
		corev1.ResourceMemory: resource.MustParse("128Mi"),
	}}
	if tmpl.Resources != nil {
		resources = *tmpl.Resources.DeepCopy()
	}
	livez, readyz := "/livez", "/readyz"
	if strings.HasPrefix(c.Spec.VersionOrDefault(), "3.5.") {
		// etcd 3.5 has no /livez and /readyz; /health fails without a leader, the serializable form does
		// not. It also fails on any alarm: a NOSPACE alarm (the cluster refuses writes, serves reads)
		// must neither restart the members nor take them out of the client Service, as 3.6's /livez and
		// /readyz do not.
		livez, readyz = "/health?serializable=true&exclude=NOSPACE", "/health?exclude=NOSPACE"
	}
	return corev1.Container{
		Name:    "etcd",
		Image:   o.Image(c),
		Command: o.EtcdArgs(c, m),
		Ports: []corev1.ContainerPort{
			{Name: "client", ContainerPort: ClientPort, Protocol: corev1.ProtocolTCP},
			{Name: "peer", ContainerPort: PeerPort, Protocol: corev1.ProtocolTCP},
			{Name: "metrics", ContainerPort: MetricsPort, Protocol: corev1.ProtocolTCP},
		},
		Resources: resources,
		// A member may replay a long WAL before it answers: the startup probe allows 5 minutes.
		StartupProbe:             metricsProbe(livez, 2, 150),
		LivenessProbe:            metricsProbe(livez, 10, 6),
		ReadinessProbe:           metricsProbe(readyz, 2, 3),
		VolumeMounts:             []corev1.VolumeMount{{Name: "data", MountPath: DataMountPath}},
		SecurityContext:          restrictedContainer(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// metricsProbe is an HTTP probe of path on the metrics port, every period seconds, failing after
// failures failed attempts of at most 5 s each.
func metricsProbe(path string, period, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromInt32(MetricsPort), Scheme: corev1.URISchemeHTTP,
		}},
		PeriodSeconds: period, TimeoutSeconds: 5, FailureThreshold: failures,
	}
}

// restrictedPod is the security context of every pod the operator builds: non-root (uid and gid
// 65532, which also owns the volumes), the runtime's default seccomp profile.
func restrictedPod() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:        ptr.To(true),
		RunAsUser:           ptr.To[int64](nonRootID),
		RunAsGroup:          ptr.To[int64](nonRootID),
		FSGroup:             ptr.To[int64](nonRootID),
		FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// restrictedContainer is the security context of every container the operator builds: no privilege
// escalation, a read-only root filesystem, no capabilities.
func restrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

func resourceMustParse(s string) resource.Quantity { return resource.MustParse(s) }

func (o Options) dataVolume(c *etcdv1alpha1.EtcdCluster, member string) corev1.Volume {
	if ed := c.Spec.Storage.EmptyDir; ed != nil {
		return corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: ed.DeepCopy()}}
	}
	return corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: PVCName(member)},
	}}
}

// defaultAffinity prefers to put the members of one cluster on different nodes.
func defaultAffinity(c *etcdv1alpha1.EtcdCluster) *corev1.Affinity {
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100,
			PodAffinityTerm: corev1.PodAffinityTerm{
				TopologyKey:   corev1.LabelHostname,
				LabelSelector: &metav1.LabelSelector{MatchLabels: SelectorLabels(c)},
			},
		}},
	}}
}

// DefaultStorageSize is the size of a member's volume when spec.storage.size is unset.
var DefaultStorageSize = resource.MustParse("1Gi")

// BuildPVC returns the PersistentVolumeClaim of member m, or nil when the cluster uses emptyDir.
// The claim records how the member was first started, so that a pod recreated on it gets the same flags.
// With retainPolicy Retain the claim has no owner, so that deleting the cluster keeps it.
func (o Options) BuildPVC(c *etcdv1alpha1.EtcdCluster, m Member) *corev1.PersistentVolumeClaim {
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
				etcdv1alpha1.AnnotationInitialClusterState: m.InitialClusterState,
				etcdv1alpha1.AnnotationInitialCluster:      m.InitialCluster,
				etcdv1alpha1.AnnotationClusterUID:          string(c.UID),
			},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      modes,
			StorageClassName: st.StorageClassName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	if st.RetainPolicy != etcdv1alpha1.RetainPolicyRetain {
		pvc.OwnerReferences = []metav1.OwnerReference{OwnerReference(c)}
	}
	return pvc
}

// BuildPeerService returns the headless Service that gives each member the DNS name of its peer URL.
// It publishes members that are not ready, so that members can find each other while they bootstrap.
func BuildPeerService(c *etcdv1alpha1.EtcdCluster) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: PeerServiceName(c), Namespace: c.Namespace, Labels: Labels(c),
			OwnerReferences: []metav1.OwnerReference{OwnerReference(c)},
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 SelectorLabels(c),
			Ports: []corev1.ServicePort{
				{Name: "peer", Port: PeerPort, TargetPort: intstr.FromInt32(PeerPort), Protocol: corev1.ProtocolTCP},
				{Name: "client", Port: ClientPort, TargetPort: intstr.FromInt32(ClientPort), Protocol: corev1.ProtocolTCP},
			},
		},
	}
}

// BuildClientService returns the ClusterIP Service clients use; it sends traffic only to ready members.
func BuildClientService(c *etcdv1alpha1.EtcdCluster) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: ClientServiceName(c), Namespace: c.Namespace, Labels: Labels(c),
			OwnerReferences: []metav1.OwnerReference{OwnerReference(c)},
		},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: SelectorLabels(c),
			Ports: []corev1.ServicePort{
				{Name: "client", Port: ClientPort, TargetPort: intstr.FromInt32(ClientPort), Protocol: corev1.ProtocolTCP},
			},
		},
	}
}

// SpecHash returns a short hash of the spec fields a member pod is built from (the etcd image, which
// the version selects, spec.podTemplate and spec.options). A member pod whose
// etcd.etcdkit.dev/spec-hash annotation differs runs an old spec and is rolled. Fields that only
// matter when a member is created (storage) and the operator's own defaults are not part of it, so that
// an operator upgrade does not restart etcd.
func (o Options) SpecHash(c *etcdv1alpha1.EtcdCluster) string {
	b, _ := json.Marshal(struct {
		Image       string                    `json:"image"`
		PodTemplate *etcdv1alpha1.PodTemplate `json:"podTemplate,omitempty"`
		Options     *etcdv1alpha1.EtcdOptions `json:"options,omitempty"`
	}{o.Image(c), c.Spec.PodTemplate, c.Spec.Options})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:5])
}

// Quorum returns the number of voting members a cluster of n needs to make progress: n/2+1.
func Quorum(n int32) int32 { return n/2 + 1 }

// BuildPDB returns the PodDisruptionBudget of the member pods: evictions (node drains) may take a
// member only while a quorum stays available (of the desired members, or of the voters that exist,
// whichever is more), and never one while another is already down.
func BuildPDB(c *etcdv1alpha1.EtcdCluster, voters int32) *policyv1.PodDisruptionBudget {
	// During a scale-down spec.replicas is already smaller than the cluster: the quorum of the voters
	// that exist is what must stay up.
	minAvailable := intstr.FromInt32(Quorum(max(c.Spec.ReplicasOrDefault(), voters)))
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{
			Name: c.Name, Namespace: c.Namespace, Labels: Labels(c),
			OwnerReferences: []metav1.OwnerReference{OwnerReference(c)},
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &minAvailable,
			Selector:     &metav1.LabelSelector{MatchLabels: SelectorLabels(c)},
		},
	}
}

// DefaultQuotaBackendBytes is etcd's own --quota-backend-bytes default, 2 GiB.
const DefaultQuotaBackendBytes int64 = 2 << 30

// QuotaBackendBytes returns the database size quota, in bytes, the members of cluster c run with:
// spec.options.quotaBackendBytes, or etcd's default.
func QuotaBackendBytes(c *etcdv1alpha1.EtcdCluster) int64 {
	if o := c.Spec.Options; o != nil && o.QuotaBackendBytes != nil {
		return o.QuotaBackendBytes.Value()
	}
	return DefaultQuotaBackendBytes
}
