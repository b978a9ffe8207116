package v1beta1

import (
	"strings"
	"testing"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestValidateAuth: spec.auth is refused with a message that says what to change when its rootSecretRef
// has no name, is not a Secret name or names one of the operator's certificate Secrets, and when an
// update turns authentication off; auth-token is reserved in extraArgs.
func TestValidateAuth(t *testing.T) {
	const ref = "spec.auth.rootSecretRef.name"
	for _, tc := range []struct {
		name string
		c    *etcdv1beta1.EtcdCluster
		errs []problem
	}{
		{"generated Secret", cluster(testutil.WithAuth(true, "")), nil},
		{"own Secret", cluster(testutil.WithAuth(true, "etcd-root")), nil},
		{"off, with a Secret named", cluster(testutil.WithAuth(false, "etcd-root")), nil},
		{"empty name", cluster(func(c *etcdv1beta1.EtcdCluster) {
			testutil.WithAuth(true, "x")(c)
			c.Spec.Auth.RootSecretRef.Name = ""
		}), []problem{{ref, `name a Secret in namespace ns1 whose key "password" holds the root password, or remove rootSecretRef to let the operator create Secret demo-root-credentials`}}},
		{"upper case name", cluster(testutil.WithAuth(true, "Root")), []problem{{ref, "is not a Secret name: a lowercase RFC 1123 subdomain"}}},
		{"name with a slash", cluster(testutil.WithAuth(true, "ns/root")), []problem{{ref, "is not a Secret name"}}},
		{"name too long", cluster(testutil.WithAuth(true, strings.Repeat("a", 254))), []problem{{ref, "is not a Secret name: must be no more than 253 characters"}}},
		{"the CA's Secret", cluster(testutil.WithAuth(true, "demo-ca")), []problem{{ref,
			"is a Secret the operator manages for the cluster's certificates (its keys are tls.crt and tls.key, not password): name another Secret, or remove rootSecretRef to let the operator create demo-root-credentials"}}},
		{"the client certificate's Secret", cluster(testutil.WithAuth(true, "demo-client-tls")), []problem{{ref, "is a Secret the operator manages"}}},
		{"the members' certificate's Secret", cluster(testutil.WithAuth(true, "demo-server-tls")), []problem{{ref, "is a Secret the operator manages"}}},
		{"the peer certificate's Secret", cluster(testutil.WithAuth(true, "demo-peer-tls")), []problem{{ref, "is a Secret the operator manages"}}},
		{"auth with restoreOnQuorumLoss", cluster(testutil.WithAuth(true, ""), testutil.WithRestoreOnQuorumLoss(true), backupSpec("@hourly", "", nil)),
			[]problem{{"spec.recovery.restoreOnQuorumLoss", "cannot be combined with spec.auth yet: without a quorum etcd authenticates no one"}}},
		{"auth-token in extraArgs", cluster(testutil.WithAuth(true, ""), extraArgs("auth-token", "jwt,pub-key=a,priv-key=b")), []problem{{"spec.options.extraArgs[auth-token]",
			"cannot be set through extraArgs: spec.auth relies on etcd's default simple tokens; a jwt token needs key files the member pods do not mount"}}},
	} {
		t.Run("create "+tc.name, func(t *testing.T) {
			errs, _ := ValidateCreate(tc.c)
			checkErrors(t, errs, tc.errs)
		})
	}

	for _, tc := range []struct {
		name   string
		old, c *etcdv1beta1.EtcdCluster
		errs   []problem
	}{
		{"turned on", cluster(), cluster(testutil.WithAuth(true, "")), nil},
		{"Secret named while on", cluster(testutil.WithAuth(true, "")), cluster(testutil.WithAuth(true, "etcd-root")), nil},
		{"turned off", cluster(testutil.WithAuth(true, "")), cluster(testutil.WithAuth(false, "")), []problem{{"spec.auth.enabled",
			"etcd authentication cannot be turned off once on: every client that reaches the client port would read and write every key. Keep spec.auth.enabled: true; to run without authentication, restore a backup into a new EtcdCluster and run `etcdctl auth disable` there as root"}}},
		{"removed", cluster(testutil.WithAuth(true, "etcd-root")), cluster(), []problem{{"spec.auth.enabled", "cannot be turned off once on"}}},
		{"off stays off", cluster(testutil.WithAuth(false, "")), cluster(), nil},
		{"bad name set while on", cluster(testutil.WithAuth(true, "")), cluster(testutil.WithAuth(true, "demo-ca")), []problem{{ref, "is a Secret the operator manages"}}},
		{"bad name kept as admitted", cluster(testutil.WithAuth(true, "Root")), cluster(testutil.WithAuth(true, "Root"), testutil.WithReplicas(5)), nil},
	} {
		t.Run("update "+tc.name, func(t *testing.T) {
			errs, _ := ValidateUpdate(tc.old, tc.c)
			checkErrors(t, errs, tc.errs)
		})
	}
}

// TestAuthWithRecoveryRefusedOnUpdate: turning restoreOnQuorumLoss on for a cluster with auth, or auth
// on for one with restoreOnQuorumLoss, is refused like on create.
func TestAuthWithRecoveryRefusedOnUpdate(t *testing.T) {
	withAuth := cluster(testutil.WithAuth(true, ""), backupSpec("@hourly", "", nil))
	withRecovery := cluster(testutil.WithRestoreOnQuorumLoss(true), backupSpec("@hourly", "", nil))
	both := cluster(testutil.WithAuth(true, ""), testutil.WithRestoreOnQuorumLoss(true), backupSpec("@hourly", "", nil))
	want := []problem{{"spec.recovery.restoreOnQuorumLoss", "cannot be combined with spec.auth yet"}}
	for name, old := range map[string]*etcdv1beta1.EtcdCluster{"recovery added": withAuth, "auth added": withRecovery} {
		errs, _ := ValidateUpdate(old, both)
		t.Run(name, func(t *testing.T) { checkErrors(t, errs, want) })
	}
}
