//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/certs"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestTLSSwitchedOnAndOffUnderLoad switches TLS on, on both ports, for a running plain-text cluster
// while a writer writes through the client Service in plain text, and then off again. Each way, every
// member first serves both http:// and https:// on its client port; the writer then moves to the new
// scheme (with the users' client certificate for https://), as a reconfigured client does within the
// grace period; each member's peer URL changes scheme one at a time; then only the new scheme is
// served. A quorum stays available throughout, no acknowledged write is lost and no write fails for a
// certificate reason.
func TestTLSSwitchedOnAndOffUnderLoad(t *testing.T) {
	t.Parallel() // mostly waits: runs with the others of its kind once the serial tests are done (suite_test.go)
	c := newCluster(t, "e2e-tls-switch", "demo", 3, testutil.WithTLS(false, false))
	assertAvailable(t, c, availableTimeout)
	ep := clientServiceEndpoint(t, c)
	w := startWriter(t, ep)
	switchTLSUnderLoad(t, c, w, true)
	ep = switchTLSUnderLoad(t, c, w, false)
	assertNoCertificateFailures(t, w)
	w.stopAndVerify(t, ep)
}

// switchTLSUnderLoad switches TLS on or off (on) on both ports of cluster c while w writes, moves w to
// the new scheme once every member serves both, waits for the switch to finish and checks what the
// members serve then and that a quorum was available throughout; it returns the client Service's
// endpoint in the new scheme.
func switchTLSUnderLoad(t *testing.T, c *etcdv1beta1.EtcdCluster, w *writer, on bool) string {
	t.Helper()
	ctx := context.Background()
	word := map[bool]string{true: "on", false: "off"}[on]
	// sample the status: a quorum available throughout, and what the switch said it was doing
	stopSampling := sampleStatus(c, func(got *etcdv1beta1.EtcdCluster) string {
		if p := meta.FindStatusCondition(got.Status.Conditions, etcdv1beta1.ConditionProgressing); p != nil && p.Status == "True" {
			return p.Reason + ": " + p.Message
		}
		return ""
	})

	patch := fmt.Sprintf(`{"spec":{"tls":{"client":{"enabled":%v},"peer":{"enabled":%v}}}}`, on, on)
	if err := k8s.Patch(ctx, c, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("switch TLS %s: %v", word, err)
	}
	bothAt := poll.Eventually(t, 10*time.Minute, "every member serves http:// and https:// on its client port", func(ctx context.Context) error {
		pods, err := memberPods(ctx, c)
		if err != nil {
			return err
		}
		for name, p := range pods {
			if tt := resources.PodTLSOf(p); !tt.ClientHTTP || !tt.ClientHTTPS || !tt.PeerCertificates {
				return fmt.Errorf("%s serves %+v", name, tt)
			}
		}
		if len(pods) != 3 {
			return fmt.Errorf("%d member pods", len(pods))
		}
		return nil
	})
	t.Logf("spec.tls %s -> every member serves both schemes in %s", word, bothAt.Round(time.Second))
	// the client is reconfigured: the new scheme through the client Service (https:// with the users'
	// certificate)
	ep := clientServiceEndpoint(t, c)
	if strings.HasPrefix(ep, "https://") != on {
		t.Fatalf("client Service endpoint %s after switching TLS %s", ep, word)
	}
	w.switchTo(t, ep)

	want := resources.PodTLS{ClientHTTP: !on, ClientHTTPS: on, PeerCertificates: on, PeerHTTPS: on}
	scheme := map[bool]string{true: "https://", false: "http://"}[on]
	took := poll.Eventually(t, 15*time.Minute, "TLS switched "+word+" on both ports", func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		pods, err := memberPods(ctx, c)
		if err != nil {
			return err
		}
		for name, p := range pods {
			if tt := resources.PodTLSOf(p); tt != want {
				return fmt.Errorf("%s serves %+v", name, tt)
			}
		}
		for _, m := range got.Status.Members {
			if !strings.HasPrefix(m.PeerURL, scheme) {
				return fmt.Errorf("member %s has peer URL %s", m.Name, m.PeerURL)
			}
		}
		if got.Status.ReadyReplicas != 3 || len(got.Status.Members) != 3 || len(pods) != 3 {
			return fmt.Errorf("%d/3 ready, %d members, %d pods", got.Status.ReadyReplicas, len(got.Status.Members), len(pods))
		}
		if p := meta.FindStatusCondition(got.Status.Conditions, etcdv1beta1.ConditionProgressing); p != nil && p.Status == "True" {
			return fmt.Errorf("progressing: %s: %s", p.Reason, p.Message)
		}
		if (got.Status.TLS != nil) != on {
			return fmt.Errorf("status.tls %+v", got.Status.TLS)
		}
		return nil
	})
	t.Logf("spec.tls %s -> the switch finished on both ports, all 3 members ready, in %s", word, (bothAt + took).Round(time.Second))
	s := stopSampling()
	t.Logf("steps: %s", strings.Join(s.steps, " | "))
	if len(s.unavailable) > 0 {
		t.Errorf("quorum not available throughout the switch %s: %v", word, s.unavailable)
	}
	if !strings.Contains(strings.Join(s.steps, "|"), etcdv1beta1.ReasonSwitchingTLS) {
		t.Errorf("the Progressing condition never said %s: %v", etcdv1beta1.ReasonSwitchingTLS, s.steps)
	}

	// only the new scheme is served on the client port (a client with the users' certificate gets in
	// over https://), and the peer port serves a certificate of the cluster's CA exactly when on
	pods, err := memberPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := secretCert(ctx, c, c.Name+resources.CASecretSuffix)
	if err != nil {
		t.Fatal(err)
	}
	userTLS, err := clusterClientTLS(ctx, c.Namespace, c.Name)
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range pods {
		if err := getKey(ctx, "http://"+p.Status.PodIP+":2379", nil); (err == nil) == on {
			t.Errorf("%s: a plain-text read on the client port: %v (TLS %s)", name, err, word)
		}
		if err := getKey(ctx, "https://"+p.Status.PodIP+":2379", userTLS); (err == nil) != on {
			t.Errorf("%s: a read with the users' client certificate: %v (TLS %s)", name, err, word)
		}
		cert, err := certs.ServedCertificate(ctx, p.Status.PodIP+":2380")
		if served := err == nil && cert.CheckSignatureFrom(ca) == nil; served != on {
			t.Errorf("%s serves a certificate of the cluster's CA on its peer port: %v (%v); TLS %s", name, served, err, word)
		}
	}
	return ep
}
