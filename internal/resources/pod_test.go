package resources

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

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
	c := cluster(func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.PodTemplate = &etcdv1beta1.PodTemplate{
			Labels:       map[string]string{"team": "a", etcdv1beta1.LabelCluster: "hijack"},
			NodeSelector: map[string]string{"disk": "ssd"},
			Resources:    &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
		}
	})
	pod := Options{}.BuildPod(c, Member{Name: "demo-0", InitialClusterState: StateExisting, InitialCluster: "x"})
	if pod.Spec.Hostname != "demo-0" || pod.Spec.Subdomain != "demo-peer" {
		t.Errorf("hostname/subdomain = %q/%q; the peer URL's DNS name needs demo-0/demo-peer", pod.Spec.Hostname, pod.Spec.Subdomain)
	}
	if pod.Labels["team"] != "a" || pod.Labels[etcdv1beta1.LabelCluster] != "demo" || pod.Labels[etcdv1beta1.LabelMember] != "demo-0" {
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
	// the pod turns Ready only once the operator has seen its etcd serve clients
	if !HasServingGate(pod) || len(pod.Spec.ReadinessGates) != 1 {
		t.Errorf("readiness gates = %+v, want %s alone", pod.Spec.ReadinessGates, ServingCondition)
	}
	// a member that stops answering is out of the client Service within 6 × 2 s
	if r := ctr.ReadinessProbe; r.PeriodSeconds != 1 || r.TimeoutSeconds != 2 || r.FailureThreshold != 6 {
		t.Errorf("readiness probe every %d s, timeout %d s, %d failures; want 1, 2, 6", r.PeriodSeconds, r.TimeoutSeconds, r.FailureThreshold)
	}

	old := Options{}.BuildPod(cluster(func(c *etcdv1beta1.EtcdCluster) { c.Spec.Version = "3.5.21" }), Member{Name: "demo-0"})
	// 3.5 has no /readyz or /livez; its /health fails on any alarm unless excluded, and NOSPACE must
	// neither restart members nor make them unready
	if p := old.Spec.Containers[0].ReadinessProbe.HTTPGet.Path; p != "/health?exclude=NOSPACE" {
		t.Errorf("3.5 readiness probe = %s, want /health?exclude=NOSPACE", p)
	}
	if p := old.Spec.Containers[0].LivenessProbe.HTTPGet.Path; p != "/health?serializable=true&exclude=NOSPACE" {
		t.Errorf("3.5 liveness probe = %s, want /health?serializable=true&exclude=NOSPACE", p)
	}

	ephemeral := Options{}.BuildPod(cluster(func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.Storage.EmptyDir = &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
	}), Member{Name: "demo-0"})
	if v := ephemeral.Spec.Volumes[0]; v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory {
		t.Errorf("emptyDir volume = %+v", v)
	}
}

// TestOptionArgs: typed options become etcd flags; extraArgs follow sorted, reserved ones dropped.
func TestOptionArgs(t *testing.T) {
	q := resource.MustParse("8Gi")
	c := cluster(func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.Options = &etcdv1beta1.EtcdOptions{
			QuotaBackendBytes: &q, AutoCompactionMode: etcdv1beta1.AutoCompactionPeriodic, AutoCompactionRetention: "1h",
			SnapshotCount: ptr.To[int64](5000), HeartbeatIntervalMillis: ptr.To[int32](200), ElectionTimeoutMillis: ptr.To[int32](2000),
			MaxRequestBytes: ptr.To[int32](2097152),
			ExtraArgs:       map[string]string{"log-level": "warn", "data-dir": "/elsewhere", "experimental-compact-hash-check-enabled": "true"},
		}
	})
	args := Options{}.EtcdArgs(c, Member{Name: "c-0", InitialClusterState: StateNew, InitialCluster: "c-0=http://x:2380"})
	want := []string{"--quota-backend-bytes=8589934592", "--auto-compaction-mode=periodic", "--auto-compaction-retention=1h",
		"--snapshot-count=5000", "--heartbeat-interval=200", "--election-timeout=2000", "--max-request-bytes=2097152",
		"--experimental-compact-hash-check-enabled=true", "--log-level=warn"}
	if got := args[len(args)-len(want):]; !slices.Equal(got, want) {
		t.Errorf("option flags = %q, want %q", got, want)
	}
	for _, a := range args {
		if a == "--data-dir=/elsewhere" {
			t.Errorf("reserved flag passed through: %q", args)
		}
	}
}

func TestEtcdArgsAndMountsWithTLS(t *testing.T) {
	plain := cluster()
	pod := Options{}.BuildPod(plain, Member{Name: "demo-0", InitialClusterState: StateNew, InitialCluster: "x"})
	if ServesClientTLS(pod) || len(pod.Spec.Volumes) != 1 || slices.ContainsFunc(pod.Spec.Containers[0].Command, func(a string) bool {
		return strings.Contains(a, "https") || strings.Contains(a, "cert")
	}) {
		t.Fatalf("a cluster without spec.tls gets TLS: %q, volumes %v", pod.Spec.Containers[0].Command, pod.Spec.Volumes)
	}

	c := cluster(func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.TLS = &etcdv1beta1.TLSSpec{Client: &etcdv1beta1.TLSListenerSpec{Enabled: true}, Peer: &etcdv1beta1.TLSListenerSpec{Enabled: true}}
	})
	o := Options{}
	pod = o.BuildPod(c, Member{Name: "demo-0", InitialClusterState: StateNew, InitialCluster: o.InitialCluster(c, []string{"demo-0"})})
	args := pod.Spec.Containers[0].Command
	for _, w := range []string{
		"--listen-client-urls=https://0.0.0.0:2379",
		"--listen-peer-urls=https://0.0.0.0:2380",
		"--listen-metrics-urls=http://0.0.0.0:2381",
		"--advertise-client-urls=https://demo-0.demo-peer.ns1.svc.cluster.local:2379",
		"--initial-advertise-peer-urls=https://demo-0.demo-peer.ns1.svc.cluster.local:2380",
		"--initial-cluster=demo-0=https://demo-0.demo-peer.ns1.svc.cluster.local:2380",
		"--cert-file=/etc/etcd/tls/server/tls.crt",
		"--key-file=/etc/etcd/tls/server/tls.key",
		"--trusted-ca-file=/etc/etcd/tls/server/ca.crt",
		"--client-cert-auth=true",
		"--peer-cert-file=/etc/etcd/tls/peer/tls.crt",
		"--peer-key-file=/etc/etcd/tls/peer/tls.key",
		"--peer-trusted-ca-file=/etc/etcd/tls/peer/ca.crt",
		"--peer-client-cert-auth=true",
		"--peer-cert-allowed-cn=demo-peer",
		"--peer-skip-client-san-verification=true",
	} {
		if !slices.Contains(args, w) {
			t.Errorf("args lack %q; got %q", w, args)
		}
	}
	if !ServesClientTLS(pod) {
		t.Error("ServesClientTLS is false for a TLS member")
	}
	mounts := map[string]string{}
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		mounts[m.Name] = m.MountPath
		if m.Name != "data" && (!m.ReadOnly || m.SubPath != "") {
			t.Errorf("mount %s: read-only %v, subPath %q; want a read-only whole Secret, so renewals reach the files", m.Name, m.ReadOnly, m.SubPath)
		}
	}
	secrets := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil {
			secrets[v.Name] = v.Secret.SecretName
		}
	}
	if mounts["server-tls"] != "/etc/etcd/tls/server" || mounts["peer-tls"] != "/etc/etcd/tls/peer" ||
		secrets["server-tls"] != "demo-server-tls" || secrets["peer-tls"] != "demo-peer-tls" || len(secrets) != 2 {
		t.Errorf("mounts %v, secrets %v; the CA's Secret must never be mounted", mounts, secrets)
	}
	if got := o.ClientServiceURL(c); got != "https://demo-client.ns1.svc.cluster.local:2379" {
		t.Errorf("client Service URL %s", got)
	}
}

// TestPodTLSDuringSwitch: the states a switch of spec.tls passes through build pods that serve them,
// and PodTLSOf reads each back from the pod; a client port serving both schemes listens and
// advertises both on port 2379; a pod carrying the peer certificate while its peer port serves plain
// text has the peer flags and mount (etcd dials peers that serve TLS with them).
func TestPodTLSDuringSwitch(t *testing.T) {
	c := cluster()
	o := Options{}
	for _, tt := range []PodTLS{
		{ClientHTTP: true}, {ClientHTTPS: true}, {ClientHTTP: true, ClientHTTPS: true},
		{ClientHTTP: true, PeerCertificates: true}, {ClientHTTP: true, ClientHTTPS: true, PeerCertificates: true, PeerHTTPS: true},
		{ClientHTTPS: true, PeerCertificates: true, PeerHTTPS: true},
	} {
		pod := o.BuildPod(c, Member{Name: "demo-1", InitialClusterState: StateExisting, InitialCluster: "x", TLS: &tt})
		if got := PodTLSOf(pod); got != tt {
			t.Errorf("PodTLSOf(pod built as %+v) = %+v", tt, got)
		}
	}
	tt := PodTLS{ClientHTTP: true, ClientHTTPS: true, PeerCertificates: true}
	pod := o.BuildPod(c, Member{Name: "demo-1", InitialClusterState: StateExisting, InitialCluster: "x", TLS: &tt})
	args := pod.Spec.Containers[0].Command
	for _, w := range []string{
		"--listen-client-urls=http://0.0.0.0:2379,https://0.0.0.0:2379",
		"--advertise-client-urls=http://demo-1.demo-peer.ns1.svc.cluster.local:2379,https://demo-1.demo-peer.ns1.svc.cluster.local:2379",
		"--listen-peer-urls=http://0.0.0.0:2380",
		"--initial-advertise-peer-urls=http://demo-1.demo-peer.ns1.svc.cluster.local:2380",
		"--cert-file=/etc/etcd/tls/server/tls.crt",
		"--client-cert-auth=true",
		"--peer-cert-file=/etc/etcd/tls/peer/tls.crt",
		"--peer-trusted-ca-file=/etc/etcd/tls/peer/ca.crt",
	} {
		if !slices.Contains(args, w) {
			t.Errorf("args lack %q; got %q", w, args)
		}
	}
	if len(pod.Spec.Volumes) != 3 {
		t.Errorf("volumes %v, want data and both certificate Secrets", pod.Spec.Volumes)
	}
	if got := (Member{Name: "demo-1"}).PodTLS(c); got != (PodTLS{ClientHTTP: true}) {
		t.Errorf("a member without TLS set serves as the spec says: %+v", got)
	}
}

// TestPodMountsUserTLSSecrets: with spec.tls.secrets the member pods and backup Jobs mount the user's
// Secrets, and no peer common name is required (the user's peer CA identifies the members); renaming
// a Secret changes the spec hash, so the members roll onto it.
func TestPodMountsUserTLSSecrets(t *testing.T) {
	c := cluster(func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.TLS = &etcdv1beta1.TLSSpec{Client: &etcdv1beta1.TLSListenerSpec{Enabled: true}, Peer: &etcdv1beta1.TLSListenerSpec{Enabled: true},
			Secrets: &etcdv1beta1.TLSSecrets{Server: "etcd-server", Peer: "etcd-peer", Client: "etcd-client"}}
	})
	o := Options{}
	pod := o.BuildPod(c, Member{Name: "demo-0", InitialClusterState: StateNew, InitialCluster: "x"})
	secrets := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil {
			secrets[v.Name] = v.Secret.SecretName
		}
	}
	if secrets["server-tls"] != "etcd-server" || secrets["peer-tls"] != "etcd-peer" || len(secrets) != 2 {
		t.Errorf("secret volumes %v, want the user's server and peer Secrets", secrets)
	}
	if slices.ContainsFunc(pod.Spec.Containers[0].Command, func(a string) bool { return strings.HasPrefix(a, "--peer-cert-allowed-cn") }) {
		t.Errorf("args %q require the operator's peer common name of the user's certificate", pod.Spec.Containers[0].Command)
	}
	if ClientTLSSecretName(c) != "etcd-client" {
		t.Errorf("client Secret %s, want the user's", ClientTLSSecretName(c))
	}
	named := c.DeepCopy()
	named.Spec.TLS.Secrets.PeerCommonName = "etcd-peer"
	if args := o.BuildPod(named, Member{Name: "demo-0", InitialClusterState: StateNew, InitialCluster: "x"}).Spec.Containers[0].Command; !slices.Contains(args, "--peer-cert-allowed-cn=etcd-peer") {
		t.Errorf("args %q lack the peer common name of spec.tls.secrets", args)
	}
	renamed := c.DeepCopy()
	renamed.Spec.TLS.Secrets.Server = "etcd-server-2"
	if o.SpecHash(renamed) == o.SpecHash(c) {
		t.Error("renaming the server Secret keeps the spec hash: the members would not mount the new one")
	}
}

func TestCertificateNamesCoverMembersAndService(t *testing.T) {
	c := cluster()
	o := Options{ClusterDomain: "example.org"}
	got := o.ServerCertRequest(c).DNSNames
	for _, w := range []string{"*.demo-peer.ns1.svc.example.org", "*.demo-peer.ns1.svc", "demo-client",
		"demo-client.ns1", "demo-client.ns1.svc", "demo-client.ns1.svc.example.org", "localhost"} {
		if !slices.Contains(got, w) {
			t.Errorf("serving certificate lacks %q: %v", w, got)
		}
	}
	if p := o.PeerCertRequest(c); !p.Server || !p.Client || !slices.Contains(p.DNSNames, "*.demo-peer.ns1.svc.example.org") {
		t.Errorf("peer certificate request %+v", p)
	}
	if r := ClientCertRequest(); r.Server || !r.Client || r.CommonName != ClientCommonName {
		t.Errorf("client certificate request %+v", r)
	}
}

// TestAwaitPeersContainer: an initial member of a new cluster of more than one member waits in
// await-peers, which reads the pod's annotations from a downward API volume and listens on the peer
// port; a single member, a member joining a running cluster, or no operator image: no such container.
func TestAwaitPeersContainer(t *testing.T) {
	c := cluster()
	o := Options{OperatorImage: "op:1"}
	initial := o.InitialCluster(c, []string{"demo-0", "demo-1", "demo-2"})
	pod := o.BuildPod(c, Member{Name: "demo-1", InitialClusterState: StateNew, InitialCluster: initial, AwaitPeerAddresses: true})
	if len(pod.Spec.InitContainers) != 1 || pod.Spec.InitContainers[0].Name != AwaitPeersContainerName {
		t.Fatalf("init containers %+v, want %s", pod.Spec.InitContainers, AwaitPeersContainerName)
	}
	init := pod.Spec.InitContainers[0]
	for _, want := range []string{"await-peers", "--annotations-file=/etc/etcd/pod-info/annotations",
		"--annotation=" + etcdv1beta1.AnnotationPeersAddressed, "--listen=:2380"} {
		if !slices.Contains(init.Args, want) {
			t.Errorf("await-peers args %q lack %q", init.Args, want)
		}
	}
	if init.Image != "op:1" || len(init.VolumeMounts) != 1 || init.VolumeMounts[0].Name != podInfoVolume {
		t.Errorf("await-peers image %q, mounts %+v", init.Image, init.VolumeMounts)
	}
	i := slices.IndexFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == podInfoVolume })
	if i < 0 || pod.Spec.Volumes[i].DownwardAPI == nil || pod.Spec.Volumes[i].DownwardAPI.Items[0].FieldRef.FieldPath != "metadata.annotations" {
		t.Errorf("no downward API volume of the pod's annotations: %+v", pod.Spec.Volumes)
	}
	for what, m := range map[string]Member{
		"a single member":   {Name: "demo-0", InitialClusterState: StateNew, InitialCluster: o.InitialCluster(c, []string{"demo-0"}), AwaitPeerAddresses: true},
		"a joining member":  {Name: "demo-3", InitialClusterState: StateExisting, InitialCluster: initial, AwaitPeerAddresses: true},
		"no request for it": {Name: "demo-1", InitialClusterState: StateNew, InitialCluster: initial},
	} {
		if p := o.BuildPod(c, m); len(p.Spec.InitContainers) != 0 {
			t.Errorf("%s: init containers %+v, want none", what, p.Spec.InitContainers)
		}
	}
	if p := (Options{}).BuildPod(c, Member{Name: "demo-1", InitialClusterState: StateNew, InitialCluster: initial, AwaitPeerAddresses: true}); len(p.Spec.InitContainers) != 0 {
		t.Errorf("no operator image: init containers %+v, want none", p.Spec.InitContainers)
	}
}
