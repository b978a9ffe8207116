package resources

import (
	"slices"
	"strings"
	"testing"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// TestBuildPodRestore: a member restoring a snapshot gets the restore init container, which reaches the
// destination read-only and writes the member's data volume before etcd starts.
func TestBuildPodRestore(t *testing.T) {
	o := Options{OperatorImage: "local/etcd-operator:dev", OperatorImagePullPolicy: "IfNotPresent"}
	c := cluster()
	plan := &RestorePlan{Destination: etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: "backups", SubPath: "etcd"}},
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

// TestBuildPodVerifyData: a member whose claim records the identity it started with gets the verify-data
// init container, which reads the data volume (read-only) before etcd starts; without a recorded
// identity, or without the operator's image, there is none.
func TestBuildPodVerifyData(t *testing.T) {
	o := Options{OperatorImage: "local/etcd-operator:dev"}
	c := cluster()
	m := Member{Name: "c-0", InitialClusterState: StateNew, InitialCluster: "c-0=http://x:2380", ExpectMemberID: "00000000000000aa", ExpectClusterID: "00000000000000bb"}
	p := o.BuildPod(c, m)
	if len(p.Spec.InitContainers) != 1 || p.Spec.InitContainers[0].Name != VerifyDataContainerName {
		t.Fatalf("init containers %+v, want verify-data", p.Spec.InitContainers)
	}
	ic := p.Spec.InitContainers[0]
	if want := []string{"verify-data", "--data-dir=" + DataDir, "--member-id=00000000000000aa", "--cluster-id=00000000000000bb"}; !slices.Equal(ic.Args, want) {
		t.Errorf("args %q, want %q", ic.Args, want)
	}
	if len(ic.VolumeMounts) != 1 || ic.VolumeMounts[0].Name != "data" || !ic.VolumeMounts[0].ReadOnly || ic.Image != o.OperatorImage {
		t.Errorf("mounts %+v image %q: want the data volume read-only and the operator's image", ic.VolumeMounts, ic.Image)
	}
	if n := len(Options{}.BuildPod(c, m).Spec.InitContainers); n != 0 {
		t.Errorf("%d init containers without the operator's image, want 0", n)
	}
	m.ExpectMemberID = ""
	if n := len(o.BuildPod(c, m).Spec.InitContainers); n != 0 {
		t.Errorf("%d init containers without a recorded identity, want 0", n)
	}
}

// TestBuildPodAwaitAdd: a joining member's pod created before its add gets the await-add init container,
// which asks the members given (or, without them, the others of its --initial-cluster) over their peer
// URLs, with the peer certificate when the pod carries it; a pod of the initial bootstrap, or without the
// operator's image, gets none.
func TestBuildPodAwaitAdd(t *testing.T) {
	o := Options{OperatorImage: "local/etcd-operator:dev"}
	m := Member{Name: "c-3", InitialClusterState: StateExisting, InitialCluster: "c-0=http://a:2380,c-3=http://d:2380,c-4=http://e:2380", AwaitAdd: true,
		AwaitPeers: []string{"http://a:2380"}}
	plain := PodTLS{ClientHTTP: true}
	m.TLS = &plain
	p := o.BuildPod(cluster(), m)
	if len(p.Spec.InitContainers) != 1 || p.Spec.InitContainers[0].Name != AwaitAddContainerName {
		t.Fatalf("init containers %+v, want %s", p.Spec.InitContainers, AwaitAddContainerName)
	}
	ic := p.Spec.InitContainers[0]
	self := o.PeerURLScheme(cluster(), "c-3", false)
	if want := []string{"await-add", "--peer-url=" + self, "--peers=http://a:2380"}; !slices.Equal(ic.Args, want) {
		t.Errorf("args %q, want %q", ic.Args, want)
	}
	if ic.Image != o.OperatorImage || len(ic.VolumeMounts) != 0 {
		t.Errorf("image %s, mounts %+v", ic.Image, ic.VolumeMounts)
	}

	m.AwaitPeers = nil
	peer := PodTLS{ClientHTTPS: true, PeerCertificates: true, PeerHTTPS: true}
	m.TLS = &peer
	ic = o.BuildPod(cluster(), m).Spec.InitContainers[0]
	if want := []string{"await-add", "--peer-url=" + o.PeerURLScheme(cluster(), "c-3", true), "--peers=http://a:2380,http://e:2380", "--peer-tls-dir=" + peerTLSDir}; !slices.Equal(ic.Args, want) {
		t.Errorf("args %q, want %q", ic.Args, want)
	}
	if len(ic.VolumeMounts) != 1 || ic.VolumeMounts[0].Name != "peer-tls" || !ic.VolumeMounts[0].ReadOnly {
		t.Errorf("mounts %+v, want the peer certificate read-only", ic.VolumeMounts)
	}

	if q := (Options{}).BuildPod(cluster(), m); len(q.Spec.InitContainers) != 0 {
		t.Errorf("without the operator's image: init containers %+v", q.Spec.InitContainers)
	}
	m.InitialClusterState = StateNew
	if q := o.BuildPod(cluster(), m); len(q.Spec.InitContainers) != 0 {
		t.Errorf("a bootstrap member: init containers %+v", q.Spec.InitContainers)
	}
}
