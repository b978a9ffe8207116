//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// authTimeout bounds Available -> status.auth.enabled: one settled pass turns authentication on.
const authTimeout = 60 * time.Second

// useRootPassword reads cluster c's root password from Secret secret and makes the tests' clients of
// c authenticate as root with it; it returns the password.
func useRootPassword(t testing.TB, c *etcdv1beta1.EtcdCluster, secret string) string {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: secret}, s); err != nil {
		t.Fatalf("root Secret %s: %v", secret, err)
	}
	pw := string(s.Data["password"])
	if pw == "" {
		t.Fatalf("root Secret %s has no password", secret)
	}
	rootPasswords.Store(c.Namespace+"/"+c.Name, pw)
	return pw
}

// assertAuthEnabled waits until the operator reports etcd authentication on for c, with its root
// password in Secret secret.
func assertAuthEnabled(t testing.TB, c *etcdv1beta1.EtcdCluster, secret string) {
	t.Helper()
	poll.Eventually(t, authTimeout, "status.auth.enabled of "+c.Name, func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		if a := got.Status.Auth; a == nil || !a.Enabled || a.RootSecret != secret {
			return fmt.Errorf("status.auth %+v", a)
		}
		return nil
	})
}

// TestAuthBackupRestore: a cluster with TLS (the default) and spec.auth gets its root password Secret
// and etcd authentication on; a client with only the users' certificate may no longer write, a
// continuous writer authenticating as root loses no acknowledged write while a backup to S3 is taken
// (the backup Job authenticates as root), and a cluster restored from that backup, whose
// rootSecretRef holds the same password, serves every key written before the backup to root.
func TestAuthBackupRestore(t *testing.T) {
	const ns = "e2e-auth"
	c := newCluster(t, ns, "auth", 3, testutil.WithAuth(true, ""))
	store := startObjectStore(t, ns)
	_, c = assertAvailable(t, c, availableTimeout)
	if !c.Spec.ClientTLS() {
		t.Fatalf("spec.tls was not defaulted on: %+v", c.Spec.TLS)
	}
	assertAuthEnabled(t, c, "auth-root-credentials")
	password := useRootPassword(t, c, "auth-root-credentials")
	ctx := context.Background()

	ep := clientServiceEndpoint(t, c)
	// the users' certificate alone: etcd takes its common name as the user, who may do nothing
	anon, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), TLS: tlsFor(ep)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = anon.Close() }()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = anon.Put(wctx, "anon", "x")
	cancel()
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("a write without the root password: %v, want permission denied", err)
	}

	for i := range 100 {
		if _, err := etcdClient(t, ep).Put(ctx, fmt.Sprintf("data/%03d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	w := startWriter(t, ep)
	dest := store.destination(t, ns, "s3-credentials", store.secretAccessKey)
	w.mu.Lock()
	ackedBefore := append([]string(nil), w.acked...)
	w.mu.Unlock()
	createBackup(t, ns, "auth-b1", c.Name, &dest)
	b, took := waitBackup(t, ns, "auth-b1", etcdv1beta1.BackupSucceeded)
	t.Logf("backup with auth on: %s, %d bytes, revision %d", took.Round(100*time.Millisecond), b.Status.SizeBytes, b.Status.Revision)
	w.stopAndVerify(t, ep) // 0 lost acknowledged writes

	// The restored cluster's data carries the source's users: its root Secret holds the same password.
	copySecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "auth-copy-root", Namespace: ns}, Data: map[string][]byte{"password": []byte(password)}}
	if err := k8s.Create(ctx, copySecret); err != nil {
		t.Fatal(err)
	}
	restored := newCluster(t, ns, "auth-copy", 3, testutil.WithRestoreFrom("auth-b1"), testutil.WithAuth(true, "auth-copy-root"))
	useRootPassword(t, restored, "auth-copy-root")
	tookRestore, restored := assertAvailable(t, restored, availableTimeout)
	t.Logf("restored with auth: Available in %s", tookRestore.Round(100*time.Millisecond))
	assertAuthEnabled(t, restored, "auth-copy-root")
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := etcdClient(t, clientServiceEndpoint(t, restored)).Get(rctx, "", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("read the restored cluster as root: %v", err)
	}
	have := map[string]bool{}
	for _, kv := range resp.Kvs {
		have[string(kv.Key)] = true
	}
	missing := 0
	for i := range 100 {
		if !have[fmt.Sprintf("data/%03d", i)] {
			missing++
		}
	}
	for _, k := range ackedBefore {
		if !have[k] {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("the restored cluster lacks %d of the %d keys written before the backup", missing, 100+len(ackedBefore))
	}
}
