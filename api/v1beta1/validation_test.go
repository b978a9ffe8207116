package v1beta1_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	corev1 "k8s.io/api/core/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

var k8s client.Client

func TestMain(m *testing.M) {
	env, cfg, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s, err = client.New(cfg, client.Options{Scheme: testenv.Scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

var seq int

// newCluster returns a cluster c<n> in namespace default, n counting up, with opts applied.
func newCluster(opts ...testutil.ClusterOption) *etcdv1beta1.EtcdCluster {
	seq++
	return testutil.EtcdCluster(fmt.Sprintf("c%d", seq), append([]testutil.ClusterOption{testutil.InNamespace("default")}, opts...)...)
}

// TestDefaults: an empty spec gets 3 replicas, the default version, Delete retain policy.
func TestDefaults(t *testing.T) {
	c := newCluster()
	if err := k8s.Create(context.Background(), c); err != nil {
		t.Fatalf("create: %v", err)
	}
	if got := ptr.Deref(c.Spec.Replicas, 0); got != 3 {
		t.Errorf("replicas defaulted to %d, want 3", got)
	}
	if c.Spec.Version != etcdv1beta1.DefaultVersion {
		t.Errorf("version defaulted to %q, want %q", c.Spec.Version, etcdv1beta1.DefaultVersion)
	}
	if c.Spec.Storage.RetainPolicy != etcdv1beta1.RetainPolicyDelete {
		t.Errorf("retainPolicy defaulted to %q", c.Spec.Storage.RetainPolicy)
	}
}

// TestRecoveryAccepted: spec.recovery.restoreOnQuorumLoss is accepted and kept, and can be turned off
// again.
func TestRecoveryAccepted(t *testing.T) {
	ctx := context.Background()
	c := newCluster(func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.Recovery = &etcdv1beta1.RecoverySpec{RestoreOnQuorumLoss: true}
	})
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatalf("create with restoreOnQuorumLoss: %v", err)
	}
	got := &etcdv1beta1.EtcdCluster{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Recovery == nil || !got.Spec.Recovery.RestoreOnQuorumLoss {
		t.Fatalf("spec.recovery = %+v, want restoreOnQuorumLoss kept", got.Spec.Recovery)
	}
	got.Spec.Recovery.RestoreOnQuorumLoss = false
	if err := k8s.Update(ctx, got); err != nil {
		t.Fatalf("turn restoreOnQuorumLoss off: %v", err)
	}
}

// TestC10_RejectedOnCreate: invalid sizes, versions and storage get a 422 with a message that says why.
func TestC10_RejectedOnCreate(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	tests := []struct {
		name    string
		mut     testutil.ClusterOption
		message string
	}{
		{"replicas 0", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](0) }, "should be greater than or equal to 1"},
		{"replicas 11", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](11) }, "should be less than or equal to 9"},
		{"replicas 2", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](2) }, "replicas must be odd"},
		{"replicas 4", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](4) }, "of 4 is 3"},
		{"replicas 6", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](6) }, "of 6 is 4"},
		{"version with v", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Version = "v3.6.16" }, "spec.version"},
		{"version 3.4", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Version = "3.4.30" }, "spec.version must be an etcd 3.5 or 3.6 release"},
		{"version 3.7", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Version = "3.7.0" }, "spec.version must be an etcd 3.5 or 3.6 release"},
		{"version without patch", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Version = "3.6" }, "written major.minor.patch, such as 3.6.16"},
		{"storage size 0", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Storage.Size = q("0") }, "storage.size must be at least 64Mi"},
		{"storage size -1Gi", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Storage.Size = q("-1Gi") }, "storage.size must be at least 64Mi"},
		{"storage size 1m", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Storage.Size = q("1m") }, "storage.size must be at least 64Mi"},
		{"storage size 1000000Ei", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Storage.Size = q("1000000Ei") }, "storage.size must be at most 64Ti, such as 10Gi"},
		{"storage size 65Ti", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Storage.Size = q("65Ti") }, "storage.size must be at most 64Ti"},
		{"access mode typo", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Storage.AccessModes = []corev1.PersistentVolumeAccessMode{"Bogus"}
		}, "supported values"},
		{"name with a dot", func(c *etcdv1beta1.EtcdCluster) { c.Name = "dot.name" }, "is invalid: metadata: Invalid value: metadata.name must be a DNS-1035 label"},
		{"name starting with a digit", func(c *etcdv1beta1.EtcdCluster) { c.Name = "1st" }, "is invalid: metadata: Invalid value: metadata.name must be a DNS-1035 label"},
		{"name too long", func(c *etcdv1beta1.EtcdCluster) { c.Name = strings.Repeat("a", 51) }, "at most 50 characters"},
		{"emptyDir with size", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Storage.Size = q("1Gi")
			c.Spec.Storage.EmptyDir = &corev1EmptyDir
		}, "storage.emptyDir cannot be combined"},
		{"retain policy typo", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Storage.RetainPolicy = "Keep" }, "supported values"},
		{"negative replace delay", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Recovery = &etcdv1beta1.RecoverySpec{ReplaceUnhealthyMemberAfter: &metav1.Duration{Duration: -time.Minute}}
		}, "spec.recovery.replaceUnhealthyMemberAfter: Invalid value: \"-1m0s\": must be 0s (never replace) or at least 20s"},
		{"replace delay below 20s", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Recovery = &etcdv1beta1.RecoverySpec{ReplaceUnhealthyMemberAfter: &metav1.Duration{Duration: time.Second}}
		}, "replaces members that are only restarting or still starting"},
		{"election timeout below 5 heartbeats", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Options = &etcdv1beta1.EtcdOptions{HeartbeatIntervalMillis: ptr.To[int32](100), ElectionTimeoutMillis: ptr.To[int32](400)}
		}, "at least 5 times"},
		{"quota below 16Mi", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Options = &etcdv1beta1.EtcdOptions{QuotaBackendBytes: q("1Mi")}
		}, "quotaBackendBytes must be between"},
		{"compaction retention without mode", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Options = &etcdv1beta1.EtcdOptions{AutoCompactionRetention: "1h"}
		}, "needs options.autoCompactionMode"},
		{"compaction retention not a duration", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Options = &etcdv1beta1.EtcdOptions{AutoCompactionMode: etcdv1beta1.AutoCompactionPeriodic, AutoCompactionRetention: "1 hour"}
		}, "autoCompactionRetention"},
		{"defragmentation without schedule or threshold", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Maintenance = &etcdv1beta1.MaintenanceSpec{Defragmentation: &etcdv1beta1.DefragmentationSpec{}}
		}, "needs a schedule (such as \"0 3 * * *\"), a thresholdPercent (such as 50), or both"},
		{"defragmentation threshold 100", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Maintenance = &etcdv1beta1.MaintenanceSpec{Defragmentation: &etcdv1beta1.DefragmentationSpec{ThresholdPercent: ptr.To[int32](100)}}
		}, "should be less than or equal to 99"},
		{"defragmentation threshold 0", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Maintenance = &etcdv1beta1.MaintenanceSpec{Defragmentation: &etcdv1beta1.DefragmentationSpec{ThresholdPercent: ptr.To[int32](0)}}
		}, "should be greater than or equal to 1"},
		{"negative minReclaimable", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Maintenance = &etcdv1beta1.MaintenanceSpec{Defragmentation: &etcdv1beta1.DefragmentationSpec{ThresholdPercent: ptr.To[int32](50), MinReclaimable: q("-1Mi")}}
		}, "minReclaimable must not be negative"},
		{"extra arg with dashes", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Options = &etcdv1beta1.EtcdOptions{ExtraArgs: map[string]string{"--log-level": "debug"}}
		}, "without the leading '--'"},
		{"extra arg key with =", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Options = &etcdv1beta1.EtcdOptions{ExtraArgs: map[string]string{"log-level=debug": ""}}
		}, "options.extraArgs keys are etcd flag names"},
		{"extra arg key of one letter with dashes", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Options = &etcdv1beta1.EtcdOptions{ExtraArgs: map[string]string{"-v": ""}}
		}, "without the leading '--'"},
		{"extra arg key in upper case", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Options = &etcdv1beta1.EtcdOptions{ExtraArgs: map[string]string{"V": ""}}
		}, "lower-case letters, digits and '-'"},
		{"extra arg key with a space", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Options = &etcdv1beta1.EtcdOptions{ExtraArgs: map[string]string{"log level": "debug"}}
		}, "options.extraArgs keys are etcd flag names"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := k8s.Create(context.Background(), newCluster(tt.mut))
			assertInvalid(t, err, tt.message)
		})
	}
}

// TestC11_StorageQuantityNotANumber: "abc" is not a quantity; the API server rejects it when it decodes
// the object (the typed client cannot even send it, so this goes as raw JSON).
func TestC11_StorageQuantityNotANumber(t *testing.T) {
	u := map[string]any{
		"apiVersion": "etcd.etcdkit.dev/v1beta1", "kind": "EtcdCluster",
		"metadata": map[string]any{"name": "bad-quantity", "namespace": "default"},
		"spec":     map[string]any{"storage": map[string]any{"size": "abc"}},
	}
	obj := unstructuredFrom(u)
	err := k8s.Create(context.Background(), obj)
	assertInvalid(t, err, "spec.storage.size")
}

// TestMalformedValuesOneError: a value that is not a quantity (or a duration) where one is expected is
// refused with exactly one error, on that field, saying what the value should look like; the CEL
// rules that compare it to a bound guard themselves and add no evaluation error of their own.
func TestMalformedValuesOneError(t *testing.T) {
	for _, tc := range []struct {
		name  string
		field string
		spec  map[string]any
		want  string
	}{
		{"minReclaimable", "spec.maintenance.defragmentation.minReclaimable",
			map[string]any{"maintenance": map[string]any{"defragmentation": map[string]any{"thresholdPercent": int64(50), "minReclaimable": "lots"}}},
			`Invalid value: "lots": spec.maintenance.defragmentation.minReclaimable in body should match`},
		{"quotaBackendBytes", "spec.options.quotaBackendBytes",
			map[string]any{"options": map[string]any{"quotaBackendBytes": "big"}},
			`Invalid value: "big": spec.options.quotaBackendBytes in body should match`},
		{"storage size", "spec.storage.size",
			map[string]any{"storage": map[string]any{"size": "abc"}},
			`Invalid value: "abc": spec.storage.size in body should match`},
		{"replaceUnhealthyMemberAfter", "spec.recovery.replaceUnhealthyMemberAfter",
			map[string]any{"recovery": map[string]any{"replaceUnhealthyMemberAfter": "soon"}},
			`Invalid value: "soon": spec.recovery.replaceUnhealthyMemberAfter in body should match`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seq++
			obj := unstructuredFrom(map[string]any{
				"apiVersion": "etcd.etcdkit.dev/v1beta1", "kind": "EtcdCluster",
				"metadata": map[string]any{"name": fmt.Sprintf("c%d", seq), "namespace": "default"},
				"spec":     tc.spec,
			})
			err := k8s.Create(context.Background(), obj)
			assertInvalid(t, err, tc.want)
			var status apierrors.APIStatus
			if !errors.As(err, &status) || status.Status().Details == nil {
				t.Fatalf("error %v has no details", err)
			}
			causes := status.Status().Details.Causes
			if len(causes) != 1 || causes[0].Field != tc.field {
				t.Errorf("want exactly one error, on %s; got %d: %v", tc.field, len(causes), err)
			}
		})
	}
}

// TestC10_C11_RejectedOnUpdate: a running cluster cannot go to 0 members, shrink its volumes, change
// its storage class or go back a minor version; a patch downgrade is left to the webhook.
func TestC10_C11_RejectedOnUpdate(t *testing.T) {
	ctx := context.Background()
	c := newCluster(func(c *etcdv1beta1.EtcdCluster) {
		v := resource.MustParse("2Gi")
		c.Spec.Storage.Size = &v
		c.Spec.Storage.StorageClassName = ptr.To("fast")
	})
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatalf("create: %v", err)
	}
	tests := []struct {
		name    string
		mut     testutil.ClusterOption
		message string
	}{
		{"replicas 3 to 0", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](0) }, "greater than or equal to 1"},
		{"shrink storage", func(c *etcdv1beta1.EtcdCluster) { v := resource.MustParse("1Gi"); c.Spec.Storage.Size = &v }, "storage.size may only grow"},
		{"change storage class", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Storage.StorageClassName = ptr.To("slow") }, "storageClassName is immutable"},
		{"remove storage class", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Storage.StorageClassName = nil }, "cannot be added or removed"},
		{"remove storage size", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Storage.Size = nil }, "storage.size cannot be removed"},
		{"C09 downgrade minor", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Version = "3.5.35" }, "spec.version cannot be downgraded to an older minor"},
		{"C09 unsupported minor", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Version = "3.7.0" }, "spec.version must be an etcd 3.5 or 3.6 release"},
		{"switch to emptyDir", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Storage = etcdv1beta1.StorageSpec{EmptyDir: &corev1EmptyDir}
		}, "storage cannot be switched"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			upd := c.DeepCopy()
			tt.mut(upd)
			assertInvalid(t, k8s.Update(ctx, upd), tt.message)
			got := &etcdv1beta1.EtcdCluster{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
				t.Fatal(err)
			}
			if got.Generation != c.Generation {
				t.Errorf("object changed: generation %d -> %d", c.Generation, got.Generation)
			}
		})
	}
	// a patch upgrade and a change of image are allowed (they roll the members)
	up := c.DeepCopy()
	up.Spec.Version = "3.6.17"
	up.Spec.Image = "mirror.example/etcd:v3.6.17"
	if err := k8s.Update(ctx, up); err != nil {
		t.Errorf("patch upgrade was rejected: %v", err)
	}
	// growing is allowed, up to 64Ti
	grow := up.DeepCopy()
	v := resource.MustParse("3Gi")
	grow.Spec.Storage.Size = &v
	if err := k8s.Update(ctx, grow); err != nil {
		t.Errorf("growing storage was rejected: %v", err)
	}
	tooBig := grow.DeepCopy()
	tooBig.Spec.Storage.Size = ptr.To(resource.MustParse("1Pi"))
	assertInvalid(t, k8s.Update(ctx, tooBig), "storage.size must be at most 64Ti")
	// a patch downgrade passes the schema: the webhook decides from what the members run (a change back
	// to the version every member still runs cancels a change no member has taken)
	back := grow.DeepCopy()
	back.Spec.Version = "3.6.16"
	if err := k8s.Update(ctx, back); err != nil {
		t.Errorf("a patch downgrade was rejected by the schema: %v", err)
	}
}

// TestAuthCannotBeTurnedOff: the schema itself refuses turning spec.auth off, or removing it, once on
// (without the webhooks too); turning it on is allowed.
func TestAuthCannotBeTurnedOff(t *testing.T) {
	ctx := context.Background()
	c := newCluster(func(c *etcdv1beta1.EtcdCluster) { c.Name = "auth-off" })
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatalf("create: %v", err)
	}
	on := c.DeepCopy()
	testutil.WithAuth(true, "")(on)
	if err := k8s.Update(ctx, on); err != nil {
		t.Fatalf("turning auth on was rejected: %v", err)
	}
	for name, mut := range map[string]testutil.ClusterOption{
		"enabled false": testutil.WithAuth(false, ""),
		"auth removed":  func(c *etcdv1beta1.EtcdCluster) { c.Spec.Auth = nil },
	} {
		off := on.DeepCopy()
		mut(off)
		err := k8s.Update(ctx, off)
		if err == nil {
			t.Fatalf("%s: accepted", name)
		}
		assertInvalid(t, err, "spec.auth.enabled cannot be turned off once on")
	}
}

// TestTLSIssuerRejected: spec.tls.issuerRef and spec.tls.secrets exclude each other, and the issuer's
// kind is Issuer or ClusterIssuer (Issuer and cert-manager.io by default).
func TestTLSIssuerRejected(t *testing.T) {
	ctx := context.Background()
	both := newCluster(testutil.WithTLS(true, true), testutil.WithTLSSecrets("s", "p", "c"), testutil.WithIssuer("ca", ""))
	assertInvalid(t, k8s.Create(ctx, both), "spec.tls.secrets and spec.tls.issuerRef cannot both be set")
	assertInvalid(t, k8s.Create(ctx, newCluster(testutil.WithTLS(true, true), testutil.WithIssuer("ca", "Vault"))), "spec.tls.issuerRef.kind")
	assertInvalid(t, k8s.Create(ctx, newCluster(testutil.WithTLS(true, true), testutil.WithIssuer("", ""))), "spec.tls.issuerRef.name")
	assertInvalid(t, k8s.Create(ctx, newCluster(testutil.WithTLS(true, true), testutil.WithIssuer("Not A Name!", ""))), "spec.tls.issuerRef.name")
	external := newCluster(testutil.WithTLS(true, true), testutil.WithIssuer("step", "StepClusterIssuer"),
		func(c *etcdv1beta1.EtcdCluster) { c.Spec.TLS.IssuerRef.Group = "certmanager.step.sm" })
	if err := k8s.Create(ctx, external); err != nil {
		t.Errorf("an external issuer's kind and group were rejected: %v", err)
	}
	badGroup := newCluster(testutil.WithTLS(true, true), testutil.WithIssuer("x", "X"), func(c *etcdv1beta1.EtcdCluster) { c.Spec.TLS.IssuerRef.Group = "x y" })
	assertInvalid(t, k8s.Create(ctx, badGroup), "spec.tls.issuerRef.group")
	ok := newCluster(testutil.WithTLS(true, true), testutil.WithIssuer("ca", ""))
	if err := k8s.Create(ctx, ok); err != nil {
		t.Fatalf("an Issuer alone was rejected: %v", err)
	}
	if ref := ok.Spec.TLS.IssuerRef; ref.Kind != "Issuer" || ref.Group != "cert-manager.io" {
		t.Errorf("issuerRef defaults: kind %q, group %q; want Issuer, cert-manager.io", ref.Kind, ref.Group)
	}
}

func assertInvalid(t *testing.T, err error, message string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want a 422 saying %q", message)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("error %v is not a 422 Invalid", err)
	}
	if !strings.Contains(err.Error(), message) {
		t.Errorf("error %q does not say %q", err.Error(), message)
	}
}

// TestBackupAndRestoreRejected: backup destinations and restore sources name exactly one thing, an
// EtcdBackup cannot be edited, and a cluster's bootstrap cannot change after creation.
func TestBackupAndRestoreRejected(t *testing.T) {
	ctx := context.Background()
	s3 := &etcdv1beta1.S3Destination{Endpoint: "http://s3.example:9000", Bucket: "etcd", CredentialsSecretRef: etcdv1beta1.LocalObjectReference{Name: "s3"}}
	pvc := &etcdv1beta1.PVCDestination{ClaimName: "backups"}
	both := etcdv1beta1.BackupDestination{S3: s3, PVC: pvc}
	backup := func(d *etcdv1beta1.BackupDestination) *etcdv1beta1.EtcdBackup {
		seq++
		return &etcdv1beta1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("b%d", seq), Namespace: "default"},
			Spec: etcdv1beta1.EtcdBackupSpec{ClusterRef: etcdv1beta1.LocalObjectReference{Name: "demo"}, Destination: d}}
	}
	assertInvalid(t, k8s.Create(ctx, backup(&both)), "exactly one of s3 or pvc")
	assertInvalid(t, k8s.Create(ctx, backup(&etcdv1beta1.BackupDestination{})), "exactly one of s3 or pvc")
	bad := &etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: "b", SubPath: "../etc"}}
	assertInvalid(t, k8s.Create(ctx, backup(bad)), "relative path")
	badS3 := *s3
	badS3.Endpoint = "s3.example:9000"
	assertInvalid(t, k8s.Create(ctx, backup(&etcdv1beta1.BackupDestination{S3: &badS3})), "spec.destination.s3.endpoint")
	// A CA to trust means nothing without TLS.
	withCA := *s3
	withCA.CASecretRef = &etcdv1beta1.LocalObjectReference{Name: "s3-ca"}
	assertInvalid(t, k8s.Create(ctx, backup(&etcdv1beta1.BackupDestination{S3: &withCA})), "s3.caSecretRef needs an https:// endpoint")
	withCA.Endpoint = "https://s3.example:9000"
	if err := k8s.Create(ctx, backup(&etcdv1beta1.BackupDestination{S3: &withCA})); err != nil {
		t.Errorf("S3 destination with an https endpoint and a CA rejected: %v", err)
	}

	ok := backup(&etcdv1beta1.BackupDestination{PVC: pvc})
	if err := k8s.Create(ctx, ok); err != nil {
		t.Fatalf("valid EtcdBackup rejected: %v", err)
	}
	ok.Spec.ClusterRef.Name = "other"
	assertInvalid(t, k8s.Update(ctx, ok), "spec cannot change")

	assertInvalid(t, k8s.Create(ctx, newCluster(func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.Bootstrap = &etcdv1beta1.BootstrapSpec{Restore: &etcdv1beta1.RestoreSpec{
			BackupRef: &etcdv1beta1.LocalObjectReference{Name: "b"},
			Source:    &etcdv1beta1.RestoreSource{Destination: etcdv1beta1.BackupDestination{PVC: pvc}, Key: "k"}}}
	})), "exactly one of backupRef or source")

	c := newCluster(func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.Bootstrap = &etcdv1beta1.BootstrapSpec{Restore: &etcdv1beta1.RestoreSpec{BackupRef: &etcdv1beta1.LocalObjectReference{Name: "b"}}}
	})
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatalf("cluster restoring a backup rejected: %v", err)
	}
	c.Spec.Bootstrap.Restore.BackupRef.Name = "other"
	assertInvalid(t, k8s.Update(ctx, c), "spec.bootstrap is immutable")
	c.Spec.Bootstrap = nil
	assertInvalid(t, k8s.Update(ctx, c), "cannot be added or removed")
}

// TestSnapshotPathsRejected: a restore key, an S3 prefix or a PVC subPath that would reach outside the
// destination, name nothing, or carry control characters is refused by the schema, on EtcdClusters and
// EtcdBackups alike; ordinary ones are accepted.
func TestSnapshotPathsRejected(t *testing.T) {
	ctx := context.Background()
	pvc := etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: "backups"}}
	restoring := func(d etcdv1beta1.BackupDestination, key string) *etcdv1beta1.EtcdCluster {
		return newCluster(func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Bootstrap = &etcdv1beta1.BootstrapSpec{Restore: &etcdv1beta1.RestoreSpec{Source: &etcdv1beta1.RestoreSource{Destination: d, Key: key}}}
		})
	}
	s3 := func(prefix string) etcdv1beta1.BackupDestination {
		return etcdv1beta1.BackupDestination{S3: &etcdv1beta1.S3Destination{Endpoint: "http://s3.example:9000", Bucket: "etcd", Prefix: prefix,
			CredentialsSecretRef: etcdv1beta1.LocalObjectReference{Name: "s3"}}}
	}
	relative := "restore.source.key must be a relative path such as 'apps/demo/nightly-1.db', as an EtcdBackup's status.key reports it: no leading or trailing '/', no empty, '.' or '..' segment"
	for _, tc := range []struct {
		name, key, message string
	}{
		{"parent segments", "../../etc/passwd", relative},
		{"parent segment inside", "apps/../b.db", relative},
		{"leading slash", "/apps/demo/b.db", relative},
		{"trailing slash", "apps/demo/", relative},
		{"empty segment", "apps//b.db", relative},
		{"dot segment", "./b.db", relative},
		{"newline", "apps/demo/b.db\n", "restore.source.key must not contain control characters such as a newline or tab"},
		{"C1 control", "apps/demo/b.db\u0085", "restore.source.key must not contain control characters"},
	} {
		t.Run("restore key "+tc.name, func(t *testing.T) {
			assertInvalid(t, k8s.Create(ctx, restoring(pvc, tc.key)), tc.message)
		})
	}
	for _, tc := range []struct {
		name, prefix, message string
	}{
		{"parent segment", "etcd/../other", "s3.prefix must be a relative path such as 'etcd/prod': no empty, '.' or '..' segment"},
		{"empty segment", "etcd//prod", "s3.prefix must be a relative path"},
		{"tab", "etcd/\tprod", "s3.prefix must not contain control characters such as a newline or tab"},
	} {
		t.Run("s3 prefix "+tc.name, func(t *testing.T) {
			assertInvalid(t, k8s.Create(ctx, restoring(s3(tc.prefix), "apps/demo/b.db")), tc.message)
			seq++
			b := &etcdv1beta1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("b%d", seq), Namespace: "default"},
				Spec: etcdv1beta1.EtcdBackupSpec{ClusterRef: etcdv1beta1.LocalObjectReference{Name: "demo"}, Destination: ptr.To(s3(tc.prefix))}}
			assertInvalid(t, k8s.Create(ctx, b), tc.message)
		})
	}
	t.Run("pvc subPath with a newline", func(t *testing.T) {
		d := etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: "backups", SubPath: "etcd\nprod"}}
		assertInvalid(t, k8s.Create(ctx, restoring(d, "apps/demo/b.db")), "pvc.subPath must not contain control characters such as a newline or tab")
	})
	t.Run("ordinary paths", func(t *testing.T) {
		for _, c := range []*etcdv1beta1.EtcdCluster{
			restoring(pvc, "apps/demo/nightly-1.db"),
			restoring(pvc, "a..b/c..db"),
			restoring(s3("etcd/prod"), "b.db"),
			restoring(etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: "backups", SubPath: "etcd/prod"}}, "apps/demo/b.db"),
		} {
			if err := k8s.Create(ctx, c); err != nil {
				t.Errorf("refused: %v", err)
			}
		}
	})
}

// TestMinorDowngradeBackToRunningMinor: after an upgrade to the next minor that no member has taken
// (3.5 to a 3.6 release with no image, rolled back), spec.version may go back to 3.5 while
// status.currentVersion says every member still runs 3.5; once a member runs 3.6 (currentVersion is the
// lowest), it may not.
func TestMinorDowngradeBackToRunningMinor(t *testing.T) {
	ctx := context.Background()
	c := newCluster(func(c *etcdv1beta1.EtcdCluster) { c.Spec.Version = "3.5.35" })
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatalf("create: %v", err)
	}
	c.Status.CurrentVersion = "3.5.35"
	if err := k8s.Status().Update(ctx, c); err != nil {
		t.Fatalf("status: %v", err)
	}
	c.Spec.Version = "3.6.99"
	if err := k8s.Update(ctx, c); err != nil {
		t.Fatalf("upgrade to the next minor rejected: %v", err)
	}
	back := c.DeepCopy()
	back.Spec.Version = "3.5.35"
	if err := k8s.Update(ctx, back); err != nil {
		t.Errorf("going back to the minor every member runs rejected: %v", err)
	}
	c = back
	c.Spec.Version = "3.6.16"
	if err := k8s.Update(ctx, c); err != nil {
		t.Fatalf("upgrade to the next minor rejected: %v", err)
	}
	c.Status.CurrentVersion = "3.6.16"
	if err := k8s.Status().Update(ctx, c); err != nil {
		t.Fatalf("status: %v", err)
	}
	down := c.DeepCopy()
	down.Spec.Version = "3.5.35"
	assertInvalid(t, k8s.Update(ctx, down), "spec.version cannot be downgraded to an older minor")
}
