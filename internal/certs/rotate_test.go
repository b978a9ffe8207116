package certs_test

import (
	"bytes"
	"context"
	"encoding/pem"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/certs"
	"github.com/etcdkit/etcd-operator/internal/pki"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// certsIn returns how many PEM certificates bundle holds.
func certsIn(bundle []byte) int {
	n := 0
	for rest := bundle; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return n
		}
		n++
	}
}

// copySecretFiles writes Secret name's keys into dir, over what is there, as the kubelet updates a
// mounted Secret.
func copySecretFiles(t *testing.T, c *etcdv1beta1.EtcdCluster, name, dir string) {
	t.Helper()
	for k, v := range secret(t, c, name).Data {
		if err := os.WriteFile(filepath.Join(dir, k), v, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// startTLSMember starts a real etcd member on host that serves TLS on its client port with the files
// in serverDir and, unless peerDir is empty (plain text then), on its peer port with those in peerDir,
// as the member pods' flags configure it. etcd reads the certificate files on every handshake, so
// rewriting them changes what it serves.
func startTLSMember(t *testing.T, host, serverDir, peerDir string) {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = "demo-0", t.TempDir()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = true
	peerScheme := "https"
	if peerDir == "" {
		peerScheme = "http"
	}
	peer, _ := url.Parse(peerScheme + "://" + host + ":2380")
	cli, _ := url.Parse("https://" + host + ":2379")
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cli}, []url.URL{*cli}
	cfg.InitialCluster = "demo-0=" + peer.String()
	cfg.ClientTLSInfo = transport.TLSInfo{CertFile: serverDir + "/tls.crt", KeyFile: serverDir + "/tls.key",
		TrustedCAFile: serverDir + "/ca.crt", ClientCertAuth: true}
	if peerDir != "" {
		cfg.PeerTLSInfo = transport.TLSInfo{CertFile: peerDir + "/tls.crt", KeyFile: peerDir + "/tls.key",
			TrustedCAFile: peerDir + "/ca.crt", ClientCertAuth: true, SkipClientSANVerify: true}
	}
	testutil.StartEtcd(t, cfg)
}

// TestCARotationPhases walks a CA rotation through its phases against a real member serving the
// cluster's certificates: the trust bundle holds both CAs before the new one issues anything; the
// trusted-CA hash (which rolls the members) changes when the bundle does and not when only the leaves
// do; the old CA is not dropped while the member serves a certificate it issued; a pass working on a
// stale read of the CA Secret fails instead of skipping a phase; a finished rotation is not due again.
func TestCARotationPhases(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	k := &certs.Keeper{Client: k8s}
	ensure := func(wantPhase etcdv1beta1.CARotationPhase) certs.Result {
		t.Helper()
		res, err := k.Ensure(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if res.Rotation != wantPhase {
			t.Fatalf("rotation phase %q, want %q", res.Rotation, wantPhase)
		}
		return res
	}
	advance := func(res certs.Result, members map[string]string) (*certs.Changed, string) {
		t.Helper()
		ch, wait, err := k.AdvanceRotation(ctx, c, res, members)
		if err != nil {
			t.Fatal(err)
		}
		return ch, wait
	}

	res := ensure("")
	if res.TrustedCAsHash != "" {
		t.Fatalf("trusted-CA hash %q before any rotation: members started before rotations existed would restart", res.TrustedCAsHash)
	}
	if ch, _ := advance(res, nil); ch != nil {
		t.Fatalf("a new CA was rotated unasked: %+v", ch)
	}
	oldCA := secret(t, c, "demo-ca").Data["tls.crt"]
	serverDir, peerDir := writeSecret(t, secret(t, c, "demo-server-tls")), writeSecret(t, secret(t, c, "demo-peer-tls"))
	const host = "127.0.0.231"
	startTLSMember(t, host, serverDir, peerDir)
	members := map[string]string{"demo-0": host}

	// 1. start: both CAs are trusted, the old one still issues
	// certificate times have whole seconds: the annotation names a second after the CA's issue, and the
	// keeper's clock runs past it
	c.Annotations = map[string]string{etcdv1beta1.AnnotationRotateCA: time.Now().Add(time.Second).UTC().Format(time.RFC3339)}
	offset := 2 * time.Second
	k.Now = func() time.Time { return time.Now().Add(offset) }
	stale := res
	if ch, _ := advance(res, members); ch == nil || !strings.Contains(ch.Reason, "rotation started") {
		t.Fatalf("rotation not started: %+v", ch)
	}
	if _, _, err := k.AdvanceRotation(ctx, c, stale, members); !apierrors.IsConflict(err) {
		t.Fatalf("a step on a stale read of the CA Secret: err %v, want a conflict", err)
	}
	trusting := ensure(etcdv1beta1.CARotationTrustNewCA)
	if trusting.TrustedCAsHash == "" {
		t.Fatal("no trusted-CA hash once the bundle holds two CAs: the members would not restart to trust the new one")
	}
	for _, name := range []string{"demo-server-tls", "demo-peer-tls", "demo-client-tls"} {
		s := secret(t, c, name)
		if n := certsIn(s.Data["ca.crt"]); n != 2 {
			t.Errorf("secret %s: ca.crt holds %d certificates, want the old and the new CA", name, n)
		}
		if !bytes.Contains(s.Data["ca.crt"], bytes.TrimSpace(oldCA)) {
			t.Errorf("secret %s: ca.crt lost the old CA while members still serve its certificates", name)
		}
	}
	if !bytes.Equal(secret(t, c, "demo-ca").Data["tls.crt"], oldCA) {
		t.Fatal("the new CA issues before any member trusts it")
	}

	// 2. every member trusts both, and clients had time to load the bundle: the new CA issues, the
	// bundle (and so the members' pods) stays
	if ch, wait := advance(trusting, members); ch != nil || !strings.Contains(wait, "demo-client-tls") {
		t.Fatalf("the new CA issues before clients mounting the client Secret could load the bundle: change %+v, wait %q", ch, wait)
	}
	offset += certs.CARotationDwell
	if ch, _ := advance(trusting, members); ch == nil {
		t.Fatal("no step after every member trusts both CAs")
	}
	issuing := ensure(etcdv1beta1.CARotationIssueFromNewCA)
	if issuing.TrustedCAsHash != trusting.TrustedCAsHash {
		t.Fatal("the trusted-CA hash changed when only the leaves were issued again: members would restart for nothing")
	}
	newCA, err := pki.ParseCert(secret(t, c, "demo-ca").Data["tls.crt"])
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"demo-server-tls", "demo-peer-tls", "demo-client-tls"} {
		leaf, err := pki.ParseCert(secret(t, c, name).Data["tls.crt"])
		if err != nil || leaf.CheckSignatureFrom(newCA) != nil {
			t.Errorf("secret %s was not issued again by the new CA (%v)", name, err)
		}
	}
	if k.ClientTLS(c.Namespace, c.Name) == nil {
		t.Fatal("no operator client configuration")
	}

	// 3. the old CA stays trusted until clients had time to load their new certificate and the member
	// serves its new ones on both ports
	if ch, wait := advance(issuing, members); ch != nil || !strings.Contains(wait, "demo-client-tls") {
		t.Fatalf("old CA dropped before clients mounting the client Secret could load their new certificate: change %+v, wait %q", ch, wait)
	}
	offset += certs.CARotationDwell
	if ch, wait := advance(issuing, members); ch != nil || !strings.Contains(wait, "demo-0") {
		t.Fatalf("old CA dropped while the member serves its certificates: change %+v, wait %q", ch, wait)
	}
	copySecretFiles(t, c, "demo-server-tls", serverDir)
	issuing = ensure(etcdv1beta1.CARotationIssueFromNewCA)
	if ch, wait := advance(issuing, members); ch != nil || !strings.Contains(wait, "port 2380") {
		t.Fatalf("old CA dropped while the member serves an old peer certificate: change %+v, wait %q", ch, wait)
	}
	copySecretFiles(t, c, "demo-peer-tls", peerDir)
	issuing = ensure(etcdv1beta1.CARotationIssueFromNewCA)
	if ch, wait := advance(issuing, members); ch == nil {
		t.Fatalf("old CA not dropped once the member serves only new certificates: waits %q", wait)
	}
	dropping := ensure(etcdv1beta1.CARotationDropOldCA)
	if dropping.TrustedCAsHash == issuing.TrustedCAsHash || dropping.TrustedCAsHash == "" {
		t.Fatal("the trusted-CA hash did not change when the old CA left the bundle: members would keep trusting it")
	}
	for _, name := range []string{"demo-server-tls", "demo-peer-tls", "demo-client-tls"} {
		if s := secret(t, c, name); certsIn(s.Data["ca.crt"]) != 1 || bytes.Contains(s.Data["ca.crt"], bytes.TrimSpace(oldCA)) {
			t.Errorf("secret %s: ca.crt still holds the old CA", name)
		}
	}

	// 4. every member trusts only the new CA: done, and not due again for the same annotation
	if ch, _ := advance(dropping, members); ch == nil || !strings.Contains(ch.Reason, "finished") {
		t.Fatalf("rotation not finished: %+v", ch)
	}
	done := ensure("")
	if done.TrustedCAsHash != dropping.TrustedCAsHash {
		t.Fatal("the trusted-CA hash changed after the rotation finished: members would restart a third time")
	}
	if ch, _ := advance(done, members); ch != nil {
		t.Fatalf("the annotation rotated the new CA again: %+v", ch)
	}
}

// TestCARotationNotStartedWhereRestartsLoseData: a rotation restarts every member, so on a 1-member
// emptyDir cluster (where a restart deletes the only copy of the data) it is not started, and the wait
// says what to do.
func TestCARotationNotStartedWhereRestartsLoseData(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	c.Spec.Replicas = ptr.To[int32](1)
	c.Spec.Storage.EmptyDir = &corev1.EmptyDirVolumeSource{}
	k := &certs.Keeper{Client: k8s}
	res, err := k.Ensure(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	k.Now = func() time.Time { return time.Now().Add(2 * time.Second) }
	c.Annotations = map[string]string{etcdv1beta1.AnnotationRotateCA: time.Now().Add(time.Second).UTC().Format(time.RFC3339)}
	ch, wait, err := k.AdvanceRotation(ctx, c, res, nil)
	if err != nil || ch != nil || !strings.Contains(wait, "scale to 3 members first") {
		t.Fatalf("change %+v, wait %q, err %v; want no rotation and a wait that says to scale first", ch, wait, err)
	}
	if _, ok := secret(t, c, "demo-ca").Data["ca.crt"]; ok {
		t.Fatal("the CA Secret got a trust bundle: the rotation started")
	}
}

// TestStaleCACopyAfterRotationRefused: after a rotation, putting back a copy of the CA Secret taken
// before it (as "restore the Secret from a copy" might) issues nothing: the members trust only the new
// CA, and certificates of the old one would split them. Ensure fails with ErrCALost and says what to do.
func TestStaleCACopyAfterRotationRefused(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	k := &certs.Keeper{Client: k8s}
	res, err := k.Ensure(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	stale := secret(t, c, "demo-ca").DeepCopy()
	c.Annotations = map[string]string{etcdv1beta1.AnnotationRotateCA: time.Now().Add(time.Second).UTC().Format(time.RFC3339)}
	offset := 2 * time.Second
	k.Now = func() time.Time { return time.Now().Add(offset) }
	for i := 0; i < 4; i++ { // start, then three phases (each after the dwell; no members to wait for)
		if _, _, err := k.AdvanceRotation(ctx, c, res, nil); err != nil {
			t.Fatal(err)
		}
		offset += certs.CARotationDwell
		if res, err = k.Ensure(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if res.Rotation != "" || res.TrustedCAsHash == "" {
		t.Fatalf("rotation not finished: phase %q", res.Rotation)
	}
	leaf := secret(t, c, "demo-server-tls").Data["tls.crt"]
	now := secret(t, c, "demo-ca")
	now.Data, now.Annotations = stale.Data, stale.Annotations
	if err := k8s.Update(ctx, now); err != nil {
		t.Fatal(err)
	}
	_, err = k.Ensure(ctx, c)
	if reason, blocked := certs.Blocked(err); !blocked || reason != etcdv1beta1.ReasonCALost || !strings.Contains(err.Error(), "latest copy") {
		t.Fatalf("Ensure with a stale CA: err %v; want ErrCALost saying to put back the latest copy", err)
	}
	if !bytes.Equal(secret(t, c, "demo-server-tls").Data["tls.crt"], leaf) {
		t.Fatal("a certificate was issued from the stale CA")
	}
}
