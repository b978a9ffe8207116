package resources

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// cluster returns demo/ns1 (UID uid-1, 3 members, etcd 3.6.16) with opts applied.
func cluster(opts ...testutil.ClusterOption) *etcdv1alpha1.EtcdCluster {
	base := []testutil.ClusterOption{
		testutil.InNamespace("ns1"),
		testutil.WithUID("uid-1"),
		testutil.WithReplicas(3),
		testutil.WithVersion("3.6.16"),
	}
	return testutil.EtcdCluster("demo", append(base, opts...)...)
}

func TestURLsAndNames(t *testing.T) {
	c := cluster()
	o := Options{}
	if got, want := o.PeerURL(c, "demo-1"), "http://demo-1.demo-peer.ns1.svc.cluster.local:2380"; got != want {
		t.Errorf("PeerURL = %q, want %q", got, want)
	}
	if got, want := (Options{ClusterDomain: "k8s.example"}).ClientURL(c, "demo-0"), "http://demo-0.demo-peer.ns1.svc.k8s.example:2379"; got != want {
		t.Errorf("ClientURL = %q, want %q", got, want)
	}
	if got, want := o.InitialCluster(c, []string{"demo-0", "demo-1"}),
		"demo-0=http://demo-0.demo-peer.ns1.svc.cluster.local:2380,demo-1=http://demo-1.demo-peer.ns1.svc.cluster.local:2380"; got != want {
		t.Errorf("InitialCluster = %q, want %q", got, want)
	}
	if got := PVCName("demo-2"); got != "data-demo-2" {
		t.Errorf("PVCName = %q", got)
	}
}

func TestMemberOrdinal(t *testing.T) {
	c := cluster()
	for name, want := range map[string]int{"demo-0": 0, "demo-7": 7, "demo-12": 12} {
		if got, ok := MemberOrdinal(c, name); !ok || got != want {
			t.Errorf("MemberOrdinal(%q) = %d, %v; want %d, true", name, got, ok, want)
		}
	}
	for _, name := range []string{"demo", "demo-", "demo-01", "demo-x", "demo-1-2", "other-1", "demo--1"} {
		if got, ok := MemberOrdinal(c, name); ok {
			t.Errorf("MemberOrdinal(%q) = %d, true; want false", name, got)
		}
	}
}

func TestImage(t *testing.T) {
	o := Options{}
	if got := o.Image(cluster()); got != "gcr.io/etcd-development/etcd:v3.6.16" {
		t.Errorf("default image = %q", got)
	}
	if got := (Options{ImageRepository: "mirror/etcd"}).Image(cluster(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "3.5.21" })); got != "mirror/etcd:v3.5.21" {
		t.Errorf("repository image = %q", got)
	}
	if got := o.Image(cluster(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Image = "my/etcd:custom" })); got != "my/etcd:custom" {
		t.Errorf("override image = %q", got)
	}
}

func TestEtcdArgs(t *testing.T) {
	c := cluster()
	o := Options{}
	m := Member{Name: "demo-1", InitialClusterState: StateNew, InitialCluster: o.InitialCluster(c, []string{"demo-0", "demo-1", "demo-2"})}
	args := o.EtcdArgs(c, m)
	want := []string{
		"/usr/local/bin/etcd",
		"--name=demo-1",
		"--data-dir=/var/lib/etcd/data",
		"--advertise-client-urls=http://demo-1.demo-peer.ns1.svc.cluster.local:2379",
		"--initial-advertise-peer-urls=http://demo-1.demo-peer.ns1.svc.cluster.local:2380",
		"--initial-cluster-state=new",
		"--initial-cluster-token=uid-1",
		"--initial-cluster=" + m.InitialCluster,
	}
	for _, w := range want {
		if !slices.Contains(args, w) {
			t.Errorf("args lack %q; got %q", w, args)
		}
	}
	if args[0] != "/usr/local/bin/etcd" {
		t.Errorf("args[0] = %q: the image has no shell, the command must be the etcd binary", args[0])
	}
}

func TestBuildPod(t *testing.T) {
	c := cluster(func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.PodTemplate = &etcdv1alpha1.PodTemplate{
			Labels:       map[string]string{"team": "a", etcdv1alpha1.LabelCluster: "hijack"},
			NodeSelector: map[string]string{"disk": "ssd"},
			Resources:    &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
		}
	})
	pod := Options{}.BuildPod(c, Member{Name: "demo-0", InitialClusterState: StateExisting, InitialCluster: "x"})
	if pod.Spec.Hostname != "demo-0" || pod.Spec.Subdomain != "demo-peer" {
		t.Errorf("hostname/subdomain = %q/%q; the peer URL's DNS name needs demo-0/demo-peer", pod.Spec.Hostname, pod.Spec.Subdomain)
	}
	if pod.Labels["team"] != "a" || pod.Labels[etcdv1alpha1.LabelCluster] != "demo" || pod.Labels[etcdv1alpha1.LabelMember] != "demo-0" {
		t.Errorf("labels = %v: user labels kept, operator labels win", pod.Labels)
	}
	if pod.Spec.NodeSelector["disk"] != "ssd" {
		t.Errorf("nodeSelector not merged: %v", pod.Spec.NodeSelector)
	}
	ctr := pod.Spec.Containers[0]
	if got := ctr.Resources.Limits.Memory().String(); got != "1Gi" {
		t.Errorf("resources not taken from the template: %v", ctr.Resources)
	}
	if !slices.Contains(ctr.Command, "--initial-cluster-state=existing") {
		t.Errorf("command lacks the member's state: %q", ctr.Command)
	}
	if len(pod.OwnerReferences) != 1 || !*pod.OwnerReferences[0].Controller || pod.OwnerReferences[0].Name != "demo" {
		t.Errorf("ownerReferences = %+v", pod.OwnerReferences)
	}
	if v := pod.Spec.Volumes[0]; v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "data-demo-0" {
		t.Errorf("data volume = %+v", v)
	}
	if pod.Spec.Affinity == nil || pod.Spec.Affinity.PodAntiAffinity == nil {
		t.Errorf("default anti-affinity missing")
	}
	if sc := ctr.SecurityContext; sc == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation {
		t.Errorf("container security context = %+v", sc)
	}
	if ctr.ReadinessProbe.HTTPGet.Path != "/readyz" || ctr.LivenessProbe.HTTPGet.Path != "/livez" {
		t.Errorf("3.6 probes = %s / %s", ctr.ReadinessProbe.HTTPGet.Path, ctr.LivenessProbe.HTTPGet.Path)
	}

	old := Options{}.BuildPod(cluster(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "3.5.21" }), Member{Name: "demo-0"})
	// 3.5 has no /readyz or /livez; its /health fails on any alarm unless excluded, and NOSPACE must
	// neither restart members nor make them unready
	if p := old.Spec.Containers[0].ReadinessProbe.HTTPGet.Path; p != "/health?exclude=NOSPACE" {
		t.Errorf("3.5 readiness probe = %s, want /health?exclude=NOSPACE", p)
	}
	if p := old.Spec.Containers[0].LivenessProbe.HTTPGet.Path; p != "/health?serializable=true&exclude=NOSPACE" {
		t.Errorf("3.5 liveness probe = %s, want /health?serializable=true&exclude=NOSPACE", p)
	}

	ephemeral := Options{}.BuildPod(cluster(func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Storage.EmptyDir = &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
	}), Member{Name: "demo-0"})
	if v := ephemeral.Spec.Volumes[0]; v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory {
		t.Errorf("emptyDir volume = %+v", v)
	}
}

func TestBuildPVC(t *testing.T) {
	m := Member{Name: "demo-2", InitialClusterState: StateNew, InitialCluster: "demo-0=a,demo-1=b,demo-2=c"}
	tests := []struct {
		name      string
		mut       func(*etcdv1alpha1.EtcdCluster)
		wantNil   bool
		wantSize  string
		wantOwned bool
		wantClass string
	}{
		{name: "defaults", mut: func(*etcdv1alpha1.EtcdCluster) {}, wantSize: "1Gi", wantOwned: true},
		{name: "size and class", mut: func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Storage.Size = ptr.To(resource.MustParse("5Gi"))
			c.Spec.Storage.StorageClassName = ptr.To("fast")
		}, wantSize: "5Gi", wantOwned: true, wantClass: "fast"},
		{name: "retain keeps the claim unowned", mut: func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Storage.RetainPolicy = etcdv1alpha1.RetainPolicyRetain
		}, wantSize: "1Gi", wantOwned: false},
		{name: "emptyDir has no claim", mut: func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Storage.EmptyDir = &corev1.EmptyDirVolumeSource{}
		}, wantNil: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pvc := Options{}.BuildPVC(cluster(tt.mut), m)
			if tt.wantNil {
				if pvc != nil {
					t.Fatalf("BuildPVC = %+v, want nil", pvc)
				}
				return
			}
			if pvc.Name != "data-demo-2" {
				t.Errorf("name = %q", pvc.Name)
			}
			if got := pvc.Spec.Resources.Requests.Storage().String(); got != tt.wantSize {
				t.Errorf("size = %s, want %s", got, tt.wantSize)
			}
			if owned := len(pvc.OwnerReferences) == 1; owned != tt.wantOwned {
				t.Errorf("owned = %v, want %v", owned, tt.wantOwned)
			}
			if got := ptr.Deref(pvc.Spec.StorageClassName, ""); got != tt.wantClass {
				t.Errorf("storageClassName = %q, want %q", got, tt.wantClass)
			}
			if pvc.Spec.AccessModes[0] != corev1.ReadWriteOnce {
				t.Errorf("accessModes = %v", pvc.Spec.AccessModes)
			}
			if pvc.Annotations[etcdv1alpha1.AnnotationInitialCluster] != m.InitialCluster ||
				pvc.Annotations[etcdv1alpha1.AnnotationInitialClusterState] != StateNew ||
				pvc.Annotations[etcdv1alpha1.AnnotationClusterUID] != "uid-1" {
				t.Errorf("annotations = %v: the claim must record how its member was started", pvc.Annotations)
			}
		})
	}
}

func TestServices(t *testing.T) {
	c := cluster()
	peer := BuildPeerService(c)
	if peer.Name != "demo-peer" || peer.Spec.ClusterIP != corev1.ClusterIPNone || !peer.Spec.PublishNotReadyAddresses {
		t.Errorf("peer service = %+v: must be headless and publish members that are not ready", peer.Spec)
	}
	cl := BuildClientService(c)
	if cl.Name != "demo-client" || cl.Spec.ClusterIP != "" || cl.Spec.PublishNotReadyAddresses {
		t.Errorf("client service = %+v", cl.Spec)
	}
	for _, s := range []*corev1.Service{peer, cl} {
		if s.Spec.Selector[etcdv1alpha1.LabelCluster] != "demo" || !strings.HasPrefix(s.OwnerReferences[0].Kind, "EtcdCluster") {
			t.Errorf("%s: selector %v, owners %+v", s.Name, s.Spec.Selector, s.OwnerReferences)
		}
	}
}

// TestSpecHash: the hash a member pod carries changes with the fields a pod is built from, and only
// with them (scaling or growing storage must not restart members).
func TestSpecHash(t *testing.T) {
	o := Options{}
	base := o.SpecHash(cluster())
	q := resource.MustParse("2Gi")
	for _, tc := range []struct {
		name    string
		mut     func(*etcdv1alpha1.EtcdCluster)
		changes bool
	}{
		{"version", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "3.6.17" }, true},
		{"image", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Image = "mirror/etcd:v3.6.16" }, true},
		{"resources", func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.PodTemplate = &etcdv1alpha1.PodTemplate{Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}
		}, true},
		{"options", func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Options = &etcdv1alpha1.EtcdOptions{ExtraArgs: map[string]string{"log-level": "debug"}}
		}, true},
		{"replicas", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](5) }, false},
		{"storage size", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.Size = &q }, false},
		{"labels of the cluster", func(c *etcdv1alpha1.EtcdCluster) { c.Labels = map[string]string{"team": "a"} }, false},
	} {
		got := o.SpecHash(cluster(tc.mut))
		if (got != base) != tc.changes {
			t.Errorf("%s: hash %s vs %s, want changed=%v", tc.name, got, base, tc.changes)
		}
	}
	if o.SpecHash(cluster()) != base {
		t.Errorf("SpecHash is not deterministic")
	}
	p := o.BuildPod(cluster(), Member{Name: "c-0", InitialClusterState: StateNew, InitialCluster: "c-0=http://x:2380"})
	if p.Annotations[etcdv1alpha1.AnnotationSpecHash] != base {
		t.Errorf("pod annotation %q, want %q", p.Annotations[etcdv1alpha1.AnnotationSpecHash], base)
	}
}

// TestOptionArgs: typed options become etcd flags; extraArgs follow sorted, reserved ones dropped.
func TestOptionArgs(t *testing.T) {
	q := resource.MustParse("8Gi")
	c := cluster(func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Options = &etcdv1alpha1.EtcdOptions{
			QuotaBackendBytes: &q, AutoCompactionMode: "periodic", AutoCompactionRetention: "1h",
			SnapshotCount: ptr.To[int64](5000), HeartbeatIntervalMillis: ptr.To[int32](200), ElectionTimeoutMillis: ptr.To[int32](2000),
			MaxRequestBytes: ptr.To[int32](2097152),
			ExtraArgs:       map[string]string{"log-level": "warn", "data-dir": "/elsewhere", "experimental-peer-skip-client-san-verification": "true"},
		}
	})
	args := Options{}.EtcdArgs(c, Member{Name: "c-0", InitialClusterState: StateNew, InitialCluster: "c-0=http://x:2380"})
	want := []string{"--quota-backend-bytes=8589934592", "--auto-compaction-mode=periodic", "--auto-compaction-retention=1h",
		"--snapshot-count=5000", "--heartbeat-interval=200", "--election-timeout=2000", "--max-request-bytes=2097152",
		"--experimental-peer-skip-client-san-verification=true", "--log-level=warn"}
	if got := args[len(args)-len(want):]; !slices.Equal(got, want) {
		t.Errorf("option flags = %q, want %q", got, want)
	}
	for _, a := range args {
		if a == "--data-dir=/elsewhere" {
			t.Errorf("reserved flag passed through: %q", args)
		}
	}
}

// TestBuildPDB: minAvailable is the quorum of the desired members, or of the voters that exist while
// a scale-down removes them.
func TestBuildPDB(t *testing.T) {
	if got := BuildPDB(cluster(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](3) }), 5).Spec.MinAvailable.IntValue(); got != 3 {
		t.Errorf("scaling 5 -> 3: minAvailable %d, want 3 (quorum of the 5 voters that still exist)", got)
	}
	for replicas, want := range map[int32]int{1: 1, 3: 2, 5: 3, 7: 4, 9: 5} {
		pdb := BuildPDB(cluster(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = ptr.To(replicas) }), replicas)
		if pdb.Spec.MinAvailable.IntValue() != want {
			t.Errorf("replicas %d: minAvailable %s, want %d", replicas, pdb.Spec.MinAvailable.String(), want)
		}
	}
}

// TestBuildPodRestore: a member restoring a snapshot gets the restore init container, which reaches the
// destination read-only and writes the member's data volume before etcd starts.
func TestBuildPodRestore(t *testing.T) {
	o := Options{OperatorImage: "local/etcd-operator:dev", OperatorImagePullPolicy: "IfNotPresent"}
	c := cluster()
	plan := &RestorePlan{Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", SubPath: "etcd"}},
		Key: "ns/src/b.db", SHA256: strings.Repeat("a", 64)}
	p := o.BuildPod(c, Member{Name: "c-0", InitialClusterState: StateNew, InitialCluster: "c-0=http://x:2380", Restore: plan})
	if len(p.Spec.InitContainers) != 1 {
		t.Fatalf("%d init containers, want 1", len(p.Spec.InitContainers))
	}
	ic := p.Spec.InitContainers[0]
	for _, want := range []string{"restore", "--key=ns/src/b.db", "--sha256=" + plan.SHA256, "--dir=" + BackupPVCDir, "--data-dir=" + DataDir,
		"--name=c-0", "--initial-cluster=c-0=http://x:2380", "--initial-cluster-token=" + string(c.UID)} {
		if !slices.Contains(ic.Args, want) {
			t.Errorf("restore args lack %q: %q", want, ic.Args)
		}
	}
	var backups, data bool
	for _, m := range ic.VolumeMounts {
		backups = backups || (m.Name == "backups" && m.ReadOnly && m.SubPath == "etcd")
		data = data || (m.Name == "data" && m.MountPath == DataMountPath && !m.ReadOnly)
	}
	if !backups || !data {
		t.Errorf("mounts %+v: want the backup claim read-only at its subPath and the data volume writable", ic.VolumeMounts)
	}
	if ic.Image != o.OperatorImage || ic.SecurityContext == nil || !*ic.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("init container image %q security %+v", ic.Image, ic.SecurityContext)
	}
	if q := o.BuildPod(c, Member{Name: "c-1", InitialClusterState: StateExisting, InitialCluster: "c-0=http://x:2380"}); len(q.Spec.InitContainers) != 0 {
		t.Errorf("a joining member got an init container")
	}

	// A restore in place (same names and peer URLs) takes the plan's token, in the restore and in etcd's
	// flags alike, so that the restored cluster gets another cluster ID than the lost one.
	tokened := *plan
	tokened.ClusterToken = "uid-1-861c31bfc0b82f87-1790000000"
	r := o.BuildPod(c, Member{Name: "c-0", InitialClusterState: StateNew, InitialCluster: "c-0=http://x:2380", Restore: &tokened})
	want := "--initial-cluster-token=" + tokened.ClusterToken
	if !slices.Contains(r.Spec.InitContainers[0].Args, want) || !slices.Contains(r.Spec.Containers[0].Command, want) {
		t.Errorf("restore args %q, etcd command %q: want both to carry %q", r.Spec.InitContainers[0].Args, r.Spec.Containers[0].Command, want)
	}
}
