package v1beta1

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/storageversion"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestConversionThroughAPIServer: a real kube-apiserver converts EtcdClusters and EtcdBackups
// between v1alpha1 and v1beta1 by calling this package's conversion webhook: an object created in
// either version reads the same in both (autoCompactionMode spelled as each version spells it), is
// stored as v1beta1, and v1alpha1 requests get a deprecation warning.
func TestConversionThroughAPIServer(t *testing.T) {
	k, warned := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	alpha := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "conv-alpha", Namespace: "default"},
		Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](1),
			Options: &etcdv1alpha1.EtcdOptions{AutoCompactionMode: "periodic", AutoCompactionRetention: "2h"}},
	}
	if err := k.Create(ctx, alpha); err != nil {
		t.Fatalf("create in v1alpha1: %v", err)
	}
	if w := strings.Join(warned.Take(), "\n"); !strings.Contains(w, "etcd.etcdkit.dev/v1alpha1 EtcdCluster is deprecated") {
		t.Errorf("a v1alpha1 create warned %q, want the deprecation warning", w)
	}
	// The defaulting webhook ran on the v1beta1 form and its defaults came back converted.
	if alpha.Spec.TLS == nil || alpha.Spec.Options.AutoCompactionMode != "periodic" {
		t.Errorf("the created v1alpha1 object has tls %+v and autoCompactionMode %q, want TLS defaulted and periodic",
			alpha.Spec.TLS, alpha.Spec.Options.AutoCompactionMode)
	}
	beta := &etcdv1beta1.EtcdCluster{}
	if err := k.Get(ctx, client.ObjectKeyFromObject(alpha), beta); err != nil {
		t.Fatalf("get in v1beta1: %v", err)
	}
	if o := beta.Spec.Options; o == nil || o.AutoCompactionMode != etcdv1beta1.AutoCompactionPeriodic || o.AutoCompactionRetention != "2h" {
		t.Errorf("read in v1beta1, spec.options is %+v, want Periodic 2h", o)
	}
	if beta.UID != alpha.UID || beta.ResourceVersion != alpha.ResourceVersion {
		t.Errorf("v1beta1 read uid %s rv %s, v1alpha1 create gave uid %s rv %s", beta.UID, beta.ResourceVersion, alpha.UID, alpha.ResourceVersion)
	}
	assertStoredAs(ctx, t, "etcdclusters", "default", "conv-alpha", "etcd.etcdkit.dev/v1beta1")

	// An update in v1alpha1 reaches v1beta1 readers.
	alpha.Spec.Options.AutoCompactionMode, alpha.Spec.Options.AutoCompactionRetention = "revision", "10000"
	if err := k.Update(ctx, alpha); err != nil {
		t.Fatalf("update in v1alpha1: %v", err)
	}
	if err := k.Get(ctx, client.ObjectKeyFromObject(alpha), beta); err != nil {
		t.Fatalf("get in v1beta1: %v", err)
	}
	if o := beta.Spec.Options; o.AutoCompactionMode != etcdv1beta1.AutoCompactionRevision || o.AutoCompactionRetention != "10000" {
		t.Errorf("after a v1alpha1 update, v1beta1 reads spec.options %+v, want Revision 10000", o)
	}

	warned.Take()

	// An object created in v1beta1 reads in v1alpha1 as v1alpha1 spells it, status included.
	b := &etcdv1beta1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "conv-beta", Namespace: "default"},
		Spec: etcdv1beta1.EtcdClusterSpec{Replicas: ptr.To[int32](3),
			Options: &etcdv1beta1.EtcdOptions{AutoCompactionMode: etcdv1beta1.AutoCompactionRevision, AutoCompactionRetention: "5000"}},
	}
	if err := k.Create(ctx, b); err != nil {
		t.Fatalf("create in v1beta1: %v", err)
	}
	if w := warned.Take(); len(w) > 0 {
		t.Errorf("a v1beta1 create warned %q, want no warning", w)
	}
	b.Status = etcdv1beta1.EtcdClusterStatus{Phase: etcdv1beta1.PhaseRunning, ClusterID: "8e9e05c52164694d",
		TLS: &etcdv1beta1.TLSStatus{ClientScheme: etcdv1beta1.SchemeHTTPS}}
	if err := k.Status().Update(ctx, b); err != nil {
		t.Fatalf("update the status in v1beta1: %v", err)
	}
	a := &etcdv1alpha1.EtcdCluster{}
	if err := k.Get(ctx, client.ObjectKeyFromObject(b), a); err != nil {
		t.Fatalf("get in v1alpha1: %v", err)
	}
	if a.Spec.Options.AutoCompactionMode != "revision" || ptr.Deref(a.Spec.Replicas, 0) != 3 {
		t.Errorf("read in v1alpha1: autoCompactionMode %q replicas %d, want revision 3", a.Spec.Options.AutoCompactionMode, ptr.Deref(a.Spec.Replicas, 0))
	}
	if a.Status.Phase != etcdv1alpha1.PhaseRunning || a.Status.ClusterID != "8e9e05c52164694d" || a.Status.TLS == nil || a.Status.TLS.ClientScheme != "https" {
		t.Errorf("read in v1alpha1, the status is %+v", a.Status)
	}
	list := &etcdv1alpha1.EtcdClusterList{}
	if err := k.List(ctx, list, client.InNamespace("default")); err != nil {
		t.Fatalf("list in v1alpha1: %v", err)
	}
	modes := map[string]etcdv1alpha1.AutoCompactionMode{}
	for _, c := range list.Items {
		if c.Spec.Options != nil {
			modes[c.Name] = c.Spec.Options.AutoCompactionMode
		}
	}
	if modes["conv-alpha"] != "revision" || modes["conv-beta"] != "revision" {
		t.Errorf("listed in v1alpha1, the compaction modes are %v, want revision for both", modes)
	}

	// v1alpha1's schema admits a reference without a name, which the webhook, given the v1beta1 form,
	// takes as naming no backup (it used to fail reading an EtcdBackup named "").
	noName := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "conv-noname", Namespace: "default"},
		Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](1), Bootstrap: &etcdv1alpha1.BootstrapSpec{
			Restore: &etcdv1alpha1.RestoreSpec{BackupRef: &corev1.LocalObjectReference{}}}}}
	if err := k.Create(ctx, noName); err != nil {
		t.Errorf("create in v1alpha1 with an empty bootstrap.restore.backupRef: %v, want admitted", err)
	} else if err := k.Delete(ctx, noName); err != nil {
		t.Errorf("delete %s: %v", noName.Name, err)
	}

	// EtcdBackup: the same in both versions.
	bk := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "conv-backup", Namespace: "default"},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterRef: corev1Ref("conv-beta"), Member: "conv-beta-0"}}
	if err := k.Create(ctx, bk); err != nil {
		t.Fatalf("create an EtcdBackup in v1alpha1: %v", err)
	}
	hub := &etcdv1beta1.EtcdBackup{}
	if err := k.Get(ctx, client.ObjectKeyFromObject(bk), hub); err != nil {
		t.Fatalf("get the EtcdBackup in v1beta1: %v", err)
	}
	if hub.Spec.ClusterRef.Name != "conv-beta" || hub.Spec.Member != "conv-beta-0" {
		t.Errorf("read in v1beta1, the EtcdBackup's spec is %+v", hub.Spec)
	}
	assertStoredAs(ctx, t, "etcdbackups", "default", "conv-backup", "etcd.etcdkit.dev/v1beta1")
	for _, o := range []client.Object{bk, b, alpha} {
		if err := k.Delete(ctx, o); err != nil {
			t.Errorf("delete %s: %v", o.GetName(), err)
		}
	}
}

// assertStoredAs fails unless the object of resource in namespace ns is stored in the API server's
// etcd in apiVersion, read from etcd itself.
func assertStoredAs(ctx context.Context, t *testing.T, resource, ns, name, apiVersion string) {
	t.Helper()
	if got := storedAs(ctx, t, resource, ns, name); got != apiVersion {
		t.Errorf("%s %s/%s is stored as %s, want %s", resource, ns, name, got, apiVersion)
	}
}

// storedAs returns the apiVersion the object of resource in namespace ns is stored in, read from the
// API server's etcd.
func storedAs(ctx context.Context, t *testing.T, resource, ns, name string) string {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{env.ControlPlane.Etcd.URL.String()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("connect to the API server's etcd: %v", err)
	}
	defer cli.Close() //nolint:errcheck // read only
	key := "/registry/etcd.etcdkit.dev/" + resource + "/" + ns + "/" + name
	resp, err := cli.Get(ctx, key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("read %s from etcd: %d keys, err %v", key, len(resp.Kvs), err)
	}
	var meta struct {
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &meta); err != nil {
		t.Fatalf("%s is not JSON: %v", key, err)
	}
	return meta.APIVersion
}

// TestStorageMigration: objects stored as v1alpha1 (by an operator of v1alpha1, whose CRDs stored
// v1alpha1) are rewritten as v1beta1 by storageversion.Migrator, which then records v1beta1 as the
// only stored version; a second run reads no object.
func TestStorageMigration(t *testing.T) {
	k, _ := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	setStorage(ctx, t, k, "v1alpha1")
	old := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "stored-alpha", Namespace: "default"},
		Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](1),
			Options: &etcdv1alpha1.EtcdOptions{AutoCompactionMode: "revision", AutoCompactionRetention: "1000"}}}
	oldBackup := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "stored-alpha", Namespace: "default"},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterRef: corev1Ref("stored-alpha")}}
	for _, o := range []client.Object{old, oldBackup} {
		if err := k.Create(ctx, o); err != nil {
			t.Fatalf("create %s: %v", o.GetName(), err)
		}
	}
	assertStoredAs(ctx, t, "etcdclusters", "default", "stored-alpha", "etcd.etcdkit.dev/v1alpha1")
	assertStoredAs(ctx, t, "etcdbackups", "default", "stored-alpha", "etcd.etcdkit.dev/v1alpha1")
	setStorage(ctx, t, k, "v1beta1")
	for _, name := range []string{"etcdclusters.etcd.etcdkit.dev", "etcdbackups.etcd.etcdkit.dev"} {
		if got := crdOf(ctx, t, k, name).Status.StoredVersions; !slices.Contains(got, "v1alpha1") {
			t.Fatalf("CRD %s has storedVersions %v before the migration, want v1alpha1 among them", name, got)
		}
	}

	m := &storageversion.Migrator{Reader: k, Writer: k, Log: logr.Discard()}
	if err := m.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	assertStoredAs(ctx, t, "etcdclusters", "default", "stored-alpha", "etcd.etcdkit.dev/v1beta1")
	assertStoredAs(ctx, t, "etcdbackups", "default", "stored-alpha", "etcd.etcdkit.dev/v1beta1")
	for _, name := range []string{"etcdclusters.etcd.etcdkit.dev", "etcdbackups.etcd.etcdkit.dev"} {
		if got := crdOf(ctx, t, k, name).Status.StoredVersions; !slices.Equal(got, []string{"v1beta1"}) {
			t.Errorf("CRD %s has storedVersions %v after the migration, want [v1beta1]", name, got)
		}
	}
	c := &etcdv1beta1.EtcdCluster{}
	if err := k.Get(ctx, client.ObjectKeyFromObject(old), c); err != nil {
		t.Fatal(err)
	}
	if c.Spec.Options.AutoCompactionMode != etcdv1beta1.AutoCompactionRevision || c.Generation != old.Generation {
		t.Errorf("after the migration: autoCompactionMode %q generation %d, want Revision and generation %d (unchanged)",
			c.Spec.Options.AutoCompactionMode, c.Generation, old.Generation)
	}
	// Done once: another run finds storedVersions current and writes nothing.
	if err := m.Migrate(ctx); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	again := &etcdv1beta1.EtcdCluster{}
	if err := k.Get(ctx, client.ObjectKeyFromObject(old), again); err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != c.ResourceVersion {
		t.Errorf("a second migration wrote the object again (resourceVersion %s, was %s)", again.ResourceVersion, c.ResourceVersion)
	}
	for _, o := range []client.Object{oldBackup, c} {
		if err := k.Delete(ctx, o); err != nil {
			t.Errorf("delete %s: %v", o.GetName(), err)
		}
	}
}

// crdOf reads CRD name.
func crdOf(ctx context.Context, t *testing.T, k client.Client, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := k.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// setStorage makes version the storage version of both CRDs, and returns once the API server stores
// new objects in it.
func setStorage(ctx context.Context, t *testing.T, k client.Client, version string) {
	t.Helper()
	for _, name := range []string{"etcdclusters.etcd.etcdkit.dev", "etcdbackups.etcd.etcdkit.dev"} {
		crd := crdOf(ctx, t, k, name)
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == version
		}
		if err := k.Update(ctx, crd); err != nil {
			t.Fatalf("make %s the storage version of %s: %v", version, name, err)
		}
	}
	seq := 0
	testutil.Eventually(t, 30*time.Second, "the API server stores "+version, func(ctx context.Context) error {
		seq++
		probe := &etcdv1beta1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%s-%d", version, seq), Namespace: "default"},
			Spec: etcdv1beta1.EtcdBackupSpec{ClusterRef: etcdv1beta1.LocalObjectReference{Name: "probe"}}}
		if err := k.Create(ctx, probe); err != nil {
			return err
		}
		defer k.Delete(ctx, probe) //nolint:errcheck // a probe
		if got := storedAs(ctx, t, "etcdbackups", "default", probe.Name); got != "etcd.etcdkit.dev/"+version {
			return fmt.Errorf("a new EtcdBackup is stored as %s", got)
		}
		return nil
	})
}

func corev1Ref(name string) corev1.LocalObjectReference {
	return corev1.LocalObjectReference{Name: name}
}
