package resources

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// nonRootID is the user and group the etcd container runs as.
const nonRootID = 65532

// EtcdContainer is the name of the container that runs etcd in a member pod.
const EtcdContainer = "etcd"

// ServingCondition is the type of the readiness gate of every member pod: the operator sets it True
// once the member's etcd has served it a request on its client port in this pod (a linearizable read,
// or, for a learner, its status). etcd answers the readiness probe on its metrics port before it serves
// clients: a member that has just joined takes part in raft, and passes /readyz, up to 7 s before it
// has published itself and serves a client (etcd-io/etcd#16436). Without the gate the client Service
// would route clients to it meanwhile. The condition is set back to False only to drain a member about
// to be removed by a scale-down (reason ReasonRemoving): the pod leaves the client Service before its
// etcd stops. A member whose etcd restarts in the same pod is judged by its probe alone.
const ServingCondition corev1.PodConditionType = "etcd.etcdkit.dev/serving"

// ReasonRemoving is the reason of a ServingCondition set False to take the pod of a member about to be
// removed out of the client Service.
const ReasonRemoving = "Removing"

// EtcdArgs returns the etcd command line of member m (exec form: the image has no shell): the flags the
// operator owns, then spec.options (typed fields, then extraArgs sorted by name; reserved flags in
// extraArgs are dropped, admission refuses them).
func (o Options) EtcdArgs(c *etcdv1beta1.EtcdCluster, m Member) []string {
	return append(o.ownedArgs(c, m), OptionArgs(c.Spec.Options)...)
}

// OptionArgs returns the etcd flags of spec.options ("--name=value" each): the typed fields, then
// extraArgs sorted by name, without the reserved flags (etcdv1beta1.ReservedFlag).
func OptionArgs(opts *etcdv1beta1.EtcdOptions) []string {
	if opts == nil {
		return nil
	}
	var args []string
	if q := opts.QuotaBackendBytes; q != nil {
		args = append(args, "--quota-backend-bytes="+strconv.FormatInt(q.Value(), 10))
	}
	if opts.AutoCompactionMode != "" {
		args = append(args, "--auto-compaction-mode="+opts.AutoCompactionMode.Flag())
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
		if _, reserved := etcdv1beta1.ReservedFlag(k); reserved {
			continue
		}
		args = append(args, "--"+k+"="+opts.ExtraArgs[k])
	}
	return args
}

// ownedArgs returns the flags the operator decides for member m.
func (o Options) ownedArgs(c *etcdv1beta1.EtcdCluster, m Member) []string {
	t := m.PodTLS(c)
	return append([]string{
		"/usr/local/bin/etcd",
		"--name=" + m.Name,
		"--data-dir=" + DataDir,
		"--listen-peer-urls=" + scheme(t.PeerHTTPS) + "://0.0.0.0:2380",
		"--listen-client-urls=" + t.clientURLs("0.0.0.0"),
		"--listen-metrics-urls=http://0.0.0.0:2381", // the probes' port, plain HTTP on every cluster
		"--advertise-client-urls=" + t.clientURLs(o.memberHost(c, m.Name)),
		"--initial-advertise-peer-urls=" + o.PeerURLScheme(c, m.Name, t.PeerHTTPS),
		"--initial-cluster=" + m.InitialCluster,
		"--initial-cluster-state=" + m.InitialClusterState,
		"--initial-cluster-token=" + clusterToken(c, m),
	}, tlsArgs(c, t)...)
}

// BuildPod returns the pod of member m. The pod's hostname and subdomain give it the DNS name its peer
// URL names, through the headless peer Service.
func (o Options) BuildPod(c *etcdv1beta1.EtcdCluster, m Member) *corev1.Pod {
	tmpl := c.Spec.PodTemplate
	if tmpl == nil {
		tmpl = &etcdv1beta1.PodTemplate{}
	}
	labels := map[string]string{}
	maps.Copy(labels, tmpl.Labels)
	maps.Copy(labels, MemberLabels(c, m.Name)) // ours win: selectors depend on them
	annotations := map[string]string{}
	maps.Copy(annotations, tmpl.Annotations)
	annotations[etcdv1beta1.AnnotationInitialClusterState] = m.InitialClusterState
	annotations[etcdv1beta1.AnnotationSpecHash] = o.SpecHash(c)

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
			SecurityContext:              RestrictedPod(),
			ReadinessGates:               []corev1.PodReadinessGate{{ConditionType: ServingCondition}},
			Containers:                   []corev1.Container{o.etcdContainer(c, m, tmpl)},
			Volumes:                      append([]corev1.Volume{o.dataVolume(c, m.Name)}, tlsSecretVolumes(c, m.PodTLS(c))...),
		},
	}
	o.addInitContainers(c, m, pod)
	return pod
}

// HasServingGate reports whether pod has the readiness gate ServingCondition (a pod made before the
// operator added it has none).
func HasServingGate(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.ReadinessGates, func(g corev1.PodReadinessGate) bool { return g.ConditionType == ServingCondition })
}

// addInitContainers adds to pod, member m's, the init containers that run before its etcd: the restore
// of its snapshot, the check of its data directory, the wait for its add to etcd.
func (o Options) addInitContainers(c *etcdv1beta1.EtcdCluster, m Member, pod *corev1.Pod) {
	if m.Restore != nil {
		init, vols := o.restoreInitContainer(c, m, m.Restore)
		pod.Spec.InitContainers = []corev1.Container{init}
		pod.Spec.Volumes = append(pod.Spec.Volumes, vols...)
	}
	if m.ExpectMemberID != "" && m.ExpectClusterID != "" && o.OperatorImage != "" {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, o.verifyDataContainer(m))
	}
	if m.AwaitAdd && m.InitialClusterState == StateExisting && o.OperatorImage != "" {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, o.awaitAddContainer(c, m))
	}
	if m.AwaitPeerAddresses && m.InitialClusterState == StateNew && strings.Contains(m.InitialCluster, ",") && o.OperatorImage != "" {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, o.awaitPeersContainer())
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: podInfoVolume, VolumeSource: corev1.VolumeSource{
			DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{{
				Path: "annotations", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations"},
			}}},
		}})
	}
}

// AwaitPeersContainerName is the init container of an initial member's pod that holds back its etcd
// until the operator marks the pod with etcdv1beta1.AnnotationPeersAddressed (`etcd-operator
// await-peers`): etcd looks its peers' names up as soon as it starts, and a name looked up before its
// pod has an address is answered "no such host" by the cluster's DNS server from its negative cache for
// a while (5 s with CoreDNS's kubernetes plugin), during which the members cannot reach each other.
const AwaitPeersContainerName = "await-peers"

// PeersAddressedPath is the path the operator POSTs to, on an initial member's peer port (plain HTTP),
// while await-peers waits there: every initial member's pod has its address.
const PeersAddressedPath = "/etcd-operator/peers-addressed"

// podInfoVolume is the downward API volume holding the pod's annotations, for await-peers.
const (
	podInfoVolume    = "pod-info"
	podInfoMountPath = "/etc/etcd/pod-info"
)

// awaitPeersContainer returns the init container await-peers.
func (o Options) awaitPeersContainer() corev1.Container {
	return o.operatorInitContainer(AwaitPeersContainerName,
		[]string{"await-peers", "--annotations-file=" + podInfoMountPath + "/annotations",
			"--annotation=" + etcdv1beta1.AnnotationPeersAddressed, fmt.Sprintf("--listen=:%d", PeerPort)},
		[]corev1.VolumeMount{{Name: podInfoVolume, MountPath: podInfoMountPath, ReadOnly: true}})
}

// AwaitAddContainerName is the init container of a member pod created before its member was added to
// etcd: it waits until etcd lists the member (`etcd-operator await-add`).
const AwaitAddContainerName = "await-add"

// awaitAddContainer returns the init container that holds back member m's etcd until etcd lists the
// member under its peer URL, asking the members of its --initial-cluster (over the peer port, with the
// peer certificate when the pod carries it).
func (o Options) awaitAddContainer(c *etcdv1beta1.EtcdCluster, m Member) corev1.Container {
	t := m.PodTLS(c)
	self := o.PeerURLScheme(c, m.Name, t.PeerHTTPS)
	peers := m.AwaitPeers
	if len(peers) == 0 {
		for _, part := range strings.Split(m.InitialCluster, ",") {
			if name, url, ok := strings.Cut(part, "="); ok && name != m.Name {
				peers = append(peers, url)
			}
		}
	}
	args := []string{"await-add", "--peer-url=" + self, "--peers=" + strings.Join(peers, ",")}
	var mounts []corev1.VolumeMount
	if t.PeerCertificates {
		args = append(args, "--peer-tls-dir="+peerTLSDir)
		mounts = append(mounts, corev1.VolumeMount{Name: "peer-tls", MountPath: peerTLSDir, ReadOnly: true})
	}
	return o.operatorInitContainer(AwaitAddContainerName, args, mounts)
}

// operatorInitContainer returns an init container named name that runs the operator's own image with
// args and mounts: small requests (the subcommands read a file or ask a few peers), the restricted
// security context, and its log as termination message when it fails.
func (o Options) operatorInitContainer(name string, args []string, mounts []corev1.VolumeMount) corev1.Container {
	return corev1.Container{
		Name:            name,
		Image:           o.OperatorImage,
		ImagePullPolicy: corev1.PullPolicy(o.OperatorImagePullPolicy),
		Args:            args,
		VolumeMounts:    mounts,
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resourceMustParse("10m"), corev1.ResourceMemory: resourceMustParse("32Mi"),
		}},
		SecurityContext:          RestrictedContainer(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// VerifyDataContainerName is the name of the init container that checks, before etcd starts, that the
// member's data directory is its own (`etcd-operator verify-data`).
const VerifyDataContainerName = "verify-data"

// ExitNotOwn is the exit code of `etcd-operator verify-data` when the data directory is not the member's
// (empty, another member's or another cluster's).
const ExitNotOwn = 3

// verifyDataContainer returns the init container that refuses to let etcd start on a data directory that
// is not member m's (empty, another member's or another cluster's): exit code 3 with the reason as its
// termination message, which the operator reads to replace the member.
func (o Options) verifyDataContainer(m Member) corev1.Container {
	return o.operatorInitContainer(VerifyDataContainerName,
		[]string{"verify-data", "--data-dir=" + DataDir, "--member-id=" + m.ExpectMemberID, "--cluster-id=" + m.ExpectClusterID},
		[]corev1.VolumeMount{{Name: "data", MountPath: DataMountPath, ReadOnly: true}})
}

// etcdContainer returns the etcd container of member m: its command, ports, resources (the
// template's, or a small default request) and probes.
func (o Options) etcdContainer(c *etcdv1beta1.EtcdCluster, m Member, tmpl *etcdv1beta1.PodTemplate) corev1.Container {
	resources := corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("100m"),
		corev1.ResourceMemory: resource.MustParse("128Mi"),
	}}
	if tmpl.Resources != nil {
		resources = *tmpl.Resources.DeepCopy()
	}
	livez, _ := probePaths(c.Spec.VersionOrDefault())
	return corev1.Container{
		Name:    EtcdContainer,
		Image:   o.Image(c),
		Command: o.EtcdArgs(c, m),
		Ports: []corev1.ContainerPort{
			{Name: "client", ContainerPort: ClientPort, Protocol: corev1.ProtocolTCP},
			{Name: "peer", ContainerPort: PeerPort, Protocol: corev1.ProtocolTCP},
			{Name: "metrics", ContainerPort: MetricsPort, Protocol: corev1.ProtocolTCP},
		},
		Resources: resources,
		// A member may replay a long WAL before it answers: the startup probe allows 5 minutes. It and
		// the readiness probe ask every second: a member that has started is Ready (in the client
		// Service, and counted by a rolling update) at most a second after it serves.
		StartupProbe:             metricsProbe(livez, 1, 300),
		LivenessProbe:            metricsProbe(livez, 10, 6),
		ReadinessProbe:           ReadinessProbe(c.Spec.VersionOrDefault()),
		VolumeMounts:             append([]corev1.VolumeMount{{Name: "data", MountPath: DataMountPath}}, tlsMounts(c, m.PodTLS(c))...),
		SecurityContext:          RestrictedContainer(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// probePaths returns the paths of the etcd container's liveness and readiness probes for etcd
// version. etcd 3.5 has no /livez and /readyz; /health fails without a leader, the serializable form
// does not. It also fails on any alarm: a NOSPACE alarm (the cluster refuses writes, serves reads)
// must neither restart the members nor take them out of the client Service, as 3.6's /livez and
// /readyz do not.
func probePaths(version string) (livez, readyz string) {
	if strings.HasPrefix(version, "3.5.") {
		return "/health?serializable=true&exclude=NOSPACE", "/health?exclude=NOSPACE"
	}
	return "/livez", "/readyz"
}

// ReadinessProbe is the etcd container's readiness probe for etcd version (e.g. "3.6.16"): its
// readiness path on the metrics port, every second, unready after 6 failures (6 s: longer than a
// leader election, during which /readyz fails). An attempt fails after readinessTimeout without an
// answer, so a member that stops answering (a frozen process, a stalled disk) leaves the client
// Service within about 6 × 2 s, where the 5 s of the other probes would take 30 s.
func ReadinessProbe(version string) *corev1.Probe {
	_, readyz := probePaths(version)
	p := metricsProbe(readyz, 1, 6)
	p.TimeoutSeconds = readinessTimeout
	return p
}

// readinessTimeout is how long, in seconds, the readiness probe waits for an answer: a member that
// serves answers /readyz (a linearizable read of one key) in milliseconds, and a member that needs
// more than 2 s for it, six times in a row, is in no state to serve clients.
const readinessTimeout = 2

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

// RestrictedPod is the security context of every pod the operator builds: non-root (uid and gid
// 65532, which also owns the volumes), the runtime's default seccomp profile.
func RestrictedPod() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:        ptr.To(true),
		RunAsUser:           ptr.To[int64](nonRootID),
		RunAsGroup:          ptr.To[int64](nonRootID),
		FSGroup:             ptr.To[int64](nonRootID),
		FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// RestrictedContainer is the security context of every container the operator builds: no privilege
// escalation, a read-only root filesystem, no capabilities.
func RestrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

func resourceMustParse(s string) resource.Quantity { return resource.MustParse(s) }

// defaultAffinity prefers to put the members of one cluster on different nodes.
func defaultAffinity(c *etcdv1beta1.EtcdCluster) *corev1.Affinity {
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

// AdmissionPod returns the pod the spec of c makes for its first member (the first of
// InitialMemberNames, as the initial bootstrap creates it) without owner references, which need
// the UID of a cluster that may not be stored yet: what admission creates as a dry run
// (kube.CheckPod) to refuse a spec whose members' pods the API server would refuse. A cluster named
// by generateName, not named yet, gets its pod named after the prefix.
func (o Options) AdmissionPod(c *etcdv1beta1.EtcdCluster) *corev1.Pod {
	if c.Name == "" {
		c = c.DeepCopy()
		c.Name = strings.TrimSuffix(c.GenerateName, "-")
		if c.Name == "" {
			c.Name = "etcd"
		}
	}
	names := InitialMemberNames(c)
	pod := o.BuildPod(c, Member{Name: names[0], InitialClusterState: StateNew, InitialCluster: o.InitialCluster(c, names)})
	pod.OwnerReferences = nil
	return pod
}
