//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// storeTLS makes the in-cluster S3 server serve HTTPS with a certificate that a CA made by the test
// issued, which no system trusts.
type storeTLS struct {
	ca *testenv.CA
	// serverName is the Service's DNS name, which the certificate names.
	serverName string
	// certSecret holds the server's tls.crt and tls.key; caSecret the CA's ca.crt, for caSecretRef.
	certSecret, caSecret string
}

// newStoreTLS makes a CA, a certificate for the Service "s3" of ns, and the Secrets that hold them.
func newStoreTLS(t testing.TB, ns string) *storeTLS {
	t.Helper()
	c := &storeTLS{ca: testenv.NewCA(t), serverName: "s3." + ns + ".svc.cluster.local", certSecret: "s3-tls", caSecret: "s3-ca"}
	certPEM, keyPEM := c.ca.Issue(t, c.serverName, "s3."+ns+".svc", "s3")
	for _, sec := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: c.certSecret, Namespace: ns}, Data: map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM}},
		{ObjectMeta: metav1.ObjectMeta{Name: c.caSecret, Namespace: ns}, Data: map[string][]byte{"ca.crt": c.ca.CertPEM}},
	} {
		if err := k8s.Create(context.Background(), sec); err != nil {
			t.Fatalf("create secret %s: %v", sec.Name, err)
		}
	}
	return c
}

// serveFrom makes versitygw's pod serve HTTPS with the certificate.
func (c *storeTLS) serveFrom(spec *corev1.PodSpec) {
	ctr := &spec.Containers[0]
	ctr.Args = append([]string{"--cert", "/tls/tls.crt", "--key", "/tls/tls.key"}, ctr.Args...)
	ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: "tls", MountPath: "/tls", ReadOnly: true})
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: c.certSecret}}})
}

// transport trusts the CA only and checks the Service's name, whatever address it dials.
func (c *storeTLS) transport() *http.Transport {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.ca.CertPEM)
	return &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: c.serverName, MinVersion: tls.VersionTLS12}}
}

// TestBackupToS3WithPrivateCA: an S3 server whose certificate a private CA issued fails a backup that
// does not trust that CA, with a message that says so; with s3.caSecretRef naming the CA's Secret, the
// backup succeeds, a new cluster restores it, and deleting the backup with its snapshot removes the
// snapshot from the bucket: the backup Job, the restore init container and the delete Job all trust
// the CA.
func TestBackupToS3WithPrivateCA(t *testing.T) {
	const ns = "e2e-backup-tls"
	c := newCluster(t, ns, "tls", 1)
	store := startObjectStoreWith(t, ns, newStoreTLS(t, ns))
	_, c = assertAvailable(t, c, availableTimeout)
	ctx := context.Background()
	if _, err := etcdClient(t, clientServiceEndpoint(t, c)).Put(ctx, "e2e-tls-key", "value"); err != nil {
		t.Fatal(err)
	}
	dest := store.destination(t, ns, "s3-credentials", store.secretAccessKey)
	if dest.S3.CASecretRef == nil || !strings.HasPrefix(dest.S3.Endpoint, "https://") {
		t.Fatalf("destination %+v: want https with caSecretRef", dest.S3)
	}

	untrusted := dest.DeepCopy()
	untrusted.S3.CASecretRef = nil
	createBackup(t, ns, "untrusted", c.Name, untrusted)
	b, took := waitBackup(t, ns, "untrusted", etcdv1beta1.BackupFailed)
	t.Logf("without the CA: Failed %s after creation: %s", took.Round(100*time.Millisecond), b.Status.Message)
	if !strings.Contains(b.Status.Message, "certificate is not trusted") || !strings.Contains(b.Status.Message, "s3.caSecretRef") {
		t.Errorf("message %q does not say that the certificate is not trusted and how to trust it", b.Status.Message)
	}

	createBackup(t, ns, "trusted", c.Name, &dest)
	b, took = waitBackup(t, ns, "trusted", etcdv1beta1.BackupSucceeded)
	t.Logf("with caSecretRef: Succeeded %s after creation, %d bytes", took.Round(100*time.Millisecond), b.Status.SizeBytes)
	object := "e2e/" + b.Status.Key
	if info, err := store.client.StatObject(ctx, store.bucket, object, minio.StatObjectOptions{}); err != nil || info.Size != b.Status.SizeBytes {
		t.Errorf("object %s: %+v %v", object, info, err)
	}

	restored := newCluster(t, ns, "tls-copy", 1, testutil.WithRestoreFrom("trusted"))
	tookRestore, _ := assertAvailable(t, restored, availableTimeout)
	t.Logf("restore through the CA: Available %s after apply", tookRestore.Round(100*time.Millisecond))
	resp, err := etcdClient(t, clientServiceEndpoint(t, restored)).Get(ctx, "e2e-tls-key", clientv3.WithSerializable())
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "value" {
		t.Errorf("restored cluster: %+v %v, want e2e-tls-key=value", resp, err)
	}

	deleteBackupWithSnapshot(t, ns, "trusted")
	poll.Eventually(t, backupTimeout, "the snapshot deleted from the bucket", func(ctx context.Context) error {
		_, err := store.client.StatObject(ctx, store.bucket, object, minio.StatObjectOptions{})
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return nil
		}
		return errors.Join(errors.New("object still there"), err)
	})
}

// deleteBackupWithSnapshot annotates EtcdBackup name so that its stored snapshot goes with it, deletes
// it, and waits until it is gone.
func deleteBackupWithSnapshot(t testing.TB, ns, name string) {
	t.Helper()
	poll.Eventually(t, statusTimeout, "annotate and delete EtcdBackup "+name, func(ctx context.Context) error {
		b := &etcdv1beta1.EtcdBackup{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, b); err != nil {
			return err
		}
		if b.Annotations[etcdv1beta1.AnnotationDeleteSnapshot] != "true" {
			if b.Annotations == nil {
				b.Annotations = map[string]string{}
			}
			b.Annotations[etcdv1beta1.AnnotationDeleteSnapshot] = "true"
			if err := k8s.Update(ctx, b); err != nil {
				return err
			}
		}
		return k8s.Delete(ctx, b)
	})
	poll.Eventually(t, backupTimeout, "EtcdBackup "+name+" gone", func(ctx context.Context) error {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &etcdv1beta1.EtcdBackup{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return errors.Join(errors.New("still there"), err)
	})
}
