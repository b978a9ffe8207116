package auth

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// k8s is a client of a real API server (envtest), without a cache.
var k8s client.Client

func TestMain(m *testing.M) {
	env, cfg, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if k8s, err = client.New(cfg, client.Options{Scheme: testenv.Scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// newCluster creates cluster name in a namespace of its own with opts.
func newCluster(t *testing.T, name string, opts ...testutil.ClusterOption) *etcdv1beta1.EtcdCluster {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "auth-" + name}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	c := testutil.EtcdCluster(name, append([]testutil.ClusterOption{testutil.InNamespace(ns.Name)}, opts...)...)
	if err := k8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEnsure: without spec.auth there are no credentials; the generated Secret is created once, owned
// by the cluster, with a random password that later passes read back; a referenced Secret is read; a
// missing, empty, too long or space-padded referenced Secret, a foreign Secret of the generated name,
// and a generated Secret deleted once authentication is on, are refused with
// ErrSecretUnusable and a message that says what to do; no error and no printed Credentials holds the
// password.
func TestEnsure(t *testing.T) {
	ctx := context.Background()
	k := &Keeper{Client: k8s, Reader: k8s}

	if creds, _, err := k.Ensure(ctx, newCluster(t, "off")); creds != nil || err != nil {
		t.Fatalf("without spec.auth: %v, %v", creds, err)
	}

	gen := newCluster(t, "gen", testutil.WithAuth(true, ""))
	first, created, err := k.Ensure(ctx, gen)
	if err != nil || !created || first.Secret != "gen-root-credentials" || len(first.Password) != 43 {
		t.Fatalf("generated: %v created %v err %v", first, created, err)
	}
	again, created, err := k.Ensure(ctx, gen)
	if err != nil || created || again.Password != first.Password {
		t.Fatalf("second pass: created %v err %v, same password %v", created, err, again.Password == first.Password)
	}
	other := newCluster(t, "gen2", testutil.WithAuth(true, ""))
	if o, _, err := k.Ensure(ctx, other); err != nil || o.Password == first.Password {
		t.Fatalf("another cluster's password: %v (same as the first: %v)", err, o != nil && o.Password == first.Password)
	}
	s := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: gen.Namespace, Name: first.Secret}, s); err != nil || !metav1.IsControlledBy(s, gen) ||
		s.Labels["app.kubernetes.io/managed-by"] != "etcd-operator" || s.Type != corev1.SecretTypeOpaque {
		t.Fatalf("generated Secret %+v: %v", s.ObjectMeta, err)
	}
	for _, printed := range []string{first.String(), fmt.Sprint(first), fmt.Sprintf("%v %+v %#v %s", *first, *first, *first, first)} {
		if strings.Contains(printed, first.Password) || !strings.Contains(printed, "gen-root-credentials") {
			t.Errorf("printed credentials %q", printed)
		}
	}
	if cfg := first.Config(etcd.Config{}); cfg.Username != "root" || cfg.Password != first.Password {
		t.Errorf("Config sets user %q", cfg.Username)
	}
	if cfg := (*Credentials)(nil).Config(etcd.Config{}); cfg.Username != "" || cfg.Password != "" {
		t.Errorf("nil credentials set user %q", cfg.Username)
	}

	ref := newCluster(t, "ref", testutil.WithAuth(true, "etcd-root"))
	checkUnusable(t, k, ref, `secret etcd-root (spec.auth.rootSecretRef) not found: the root password Secret cannot be used: create it in namespace auth-ref with the root password under the key "password"`)
	mine := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "etcd-root", Namespace: ref.Namespace}, Data: map[string][]byte{"other": []byte("x")}}
	if err := k8s.Create(ctx, mine); err != nil {
		t.Fatal(err)
	}
	checkUnusable(t, k, ref, `secret etcd-root has no key "password" or it is empty: the root password Secret cannot be used: put the root password there`)
	mine.Data = map[string][]byte{"password": []byte("users-own-password")}
	if err := k8s.Update(ctx, mine); err != nil {
		t.Fatal(err)
	}
	if creds, created, err := k.Ensure(ctx, ref); err != nil || created || creds.Secret != "etcd-root" || creds.Password != "users-own-password" {
		t.Fatalf("referenced: %v created %v err %v", creds, created, err)
	}
	for _, tc := range []struct{ password, want string }{
		{strings.Repeat("p", 73), `secret etcd-root: the password under key "password" is longer than 72 bytes, which etcd's bcrypt cannot hash: the root password Secret cannot be used: use a shorter one`},
		{"users-own-password\n", `secret etcd-root: the password under key "password" starts or ends with white space (a file's trailing newline?), which shells and etcdctl drop: the root password Secret cannot be used: write it without (kubectl create secret generic --from-literal)`},
	} {
		mine.Data = map[string][]byte{"password": []byte(tc.password)}
		if err := k8s.Update(ctx, mine); err != nil {
			t.Fatal(err)
		}
		checkUnusable(t, k, ref, tc.want)
	}

	// the generated Secret deleted once etcd authentication is on: a new password would be refused by
	// etcd for good, so none is generated
	if err := k8s.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	gen.Status.Auth = &etcdv1beta1.AuthStatus{Enabled: true, RootSecret: first.Secret}
	checkUnusable(t, k, gen, "secret gen-root-credentials is gone but etcd authentication is on with the password it held: "+
		"the root password Secret cannot be used: restore the Secret from a copy (a new password would be refused by etcd)")

	foreign := newCluster(t, "foreign", testutil.WithAuth(true, ""))
	if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "foreign-root-credentials", Namespace: foreign.Namespace},
		Data: map[string][]byte{"password": []byte("someone-elses")}}); err != nil {
		t.Fatal(err)
	}
	checkUnusable(t, k, foreign, "secret foreign-root-credentials exists and is not this cluster's: the root password Secret cannot be used: rename or delete it, or name it in spec.auth.rootSecretRef to use its password")
}

func checkUnusable(t *testing.T, k *Keeper, c *etcdv1beta1.EtcdCluster, want string) {
	t.Helper()
	creds, _, err := k.Ensure(context.Background(), c)
	if creds != nil || !errors.Is(err, ErrSecretUnusable) || !Blocked(err) || err.Error() != want {
		t.Errorf("Ensure = %v, %v\nwant %s", creds, err, want)
	}
}
