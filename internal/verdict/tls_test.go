package verdict

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

func TestCertificatesExpiring(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	year := 365 * 24 * time.Hour
	for _, tc := range []struct {
		name     string
		o        TLSObservation
		expiring bool
		says     string
	}{
		{"fresh", TLSObservation{At: at, CANotAfter: at.Add(10 * year), NotAfter: at.Add(year), RenewAt: at.Add(8 * 30 * 24 * time.Hour)}, false, "renewed at"},
		{"leaf not renewed", TLSObservation{At: at, CANotAfter: at.Add(10 * year), NotAfter: at.Add(10 * 24 * time.Hour), RenewAt: at.Add(-100 * 24 * time.Hour)}, true, "was not renewed"},
		{"CA within a year", TLSObservation{At: at, CANotAfter: at.Add(300 * 24 * time.Hour), NotAfter: at.Add(200 * 24 * time.Hour)}, true, "was not rotated"},
		{"user's Secrets", TLSObservation{At: at, UserSecrets: true, CANotAfter: at.Add(10 * year), NotAfter: at.Add(90 * 24 * time.Hour)}, false, "(you renew them)"},
		{"user's leaf within a month", TLSObservation{At: at, UserSecrets: true, CANotAfter: at.Add(10 * year), NotAfter: at.Add(20 * 24 * time.Hour)}, true,
			"renew it (the operator does not renew the Secrets you keep)"},
		{"user's CA within a year", TLSObservation{At: at, UserSecrets: true, CANotAfter: at.Add(200 * 24 * time.Hour), NotAfter: at.Add(90 * 24 * time.Hour)}, true,
			"add its successor to ca.crt"},
		{"cert-manager's", TLSObservation{At: at, UserSecrets: true, Issuer: "Issuer ca", CANotAfter: at.Add(10 * year), NotAfter: at.Add(90 * 24 * time.Hour),
			RenewAt: at.Add(60 * 24 * time.Hour)}, false, "The CA of Issuer ca expires at 2036-11-28T00:00:00Z, the first certificate at 2027-03-01T00:00:00Z; cert-manager renews it at 2027-01-30T00:00:00Z"},
		{"cert-manager's leaf, no renewal time, within a month", TLSObservation{At: at, UserSecrets: true, Issuer: "ClusterIssuer ca", CANotAfter: at.Add(10 * year),
			NotAfter: at.Add(20 * 24 * time.Hour)}, true,
			"A certificate from cert-manager (ClusterIssuer ca, spec.tls.issuerRef) expires at 2026-12-21T00:00:00Z and was not renewed: see"},
		{"cert-manager's leaf past its renewal time", TLSObservation{At: at, UserSecrets: true, Issuer: "Issuer ca", CANotAfter: at.Add(10 * year),
			NotAfter: at.Add(5 * 24 * time.Hour), RenewAt: at.Add(-2 * time.Hour)}, true, "was not renewed (due since 2026-11-30T22:00:00Z)"},
		{"cert-manager's short-lived leaf before its renewal time", TLSObservation{At: at, UserSecrets: true, Issuer: "Issuer ca", CANotAfter: at.Add(10 * year),
			NotAfter: at.Add(20 * 24 * time.Hour), RenewAt: at.Add(13 * 24 * time.Hour)}, false, "cert-manager renews it at 2026-12-14T00:00:00Z"},
		{"cert-manager's 90-day CA", TLSObservation{At: at, UserSecrets: true, Issuer: "Issuer ca", CANotAfter: at.Add(90 * 24 * time.Hour), NotAfter: at.Add(60 * 24 * time.Hour),
			RenewAt: at.Add(40 * 24 * time.Hour)}, false, "The CA of Issuer ca expires at 2027-03-01T00:00:00Z"},
		{"cert-manager's CA within a month", TLSObservation{At: at, UserSecrets: true, Issuer: "Issuer ca", CANotAfter: at.Add(20 * 24 * time.Hour), NotAfter: at.Add(15 * 24 * time.Hour),
			RenewAt: at.Add(10 * 24 * time.Hour)}, true, "The CA of Issuer ca (spec.tls.issuerRef) expires at 2026-12-21T00:00:00Z: give the issuer a new CA and renew the cluster's Certificates together"},
	} {
		got, reason := CertificatesExpiring(&tc.o)
		if got != tc.expiring || !strings.Contains(reason[1], tc.says) {
			t.Errorf("%s: expiring %v (%s); want %v, saying %q", tc.name, got, reason[1], tc.expiring, tc.says)
		}
		if want := etcdv1beta1.ReasonCertificatesCurrent; !tc.expiring && reason[0] != want {
			t.Errorf("%s: reason %s, want %s", tc.name, reason[0], want)
		}
	}
}

func TestTLSStatusApplied(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	c := &etcdv1beta1.EtcdCluster{}
	m := model.Build(model.Input{Cluster: c, Now: at})
	s := &scope{cluster: c, m: m, report: &Report{TLS: &TLSObservation{At: at, ClientSecret: "demo-client-tls",
		CANotAfter: at.Add(10 * 365 * 24 * time.Hour), NotAfter: at.Add(365 * 24 * time.Hour), RenewAt: at.Add(240 * 24 * time.Hour)}}}
	applyTLSStatus(s)
	st := c.Status.TLS
	if st == nil || st.ClientSecret != "demo-client-tls" || !st.NotAfter.Time.Equal(at.Add(365*24*time.Hour)) || st.RenewAt == nil || st.CANotAfter == nil {
		t.Fatalf("status.tls = %+v", st)
	}
	if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionCertificatesExpiring); cond == nil ||
		cond.Status != metav1.ConditionFalse || cond.Reason != etcdv1beta1.ReasonCertificatesCurrent {
		t.Errorf("conditions %+v; want CertificatesExpiring False", c.Status.Conditions)
	}
	// a pass that did not look keeps what the status said
	applyTLSStatus(&scope{cluster: c, m: m, report: &Report{}})
	if c.Status.TLS != st {
		t.Error("a pass without an observation changed status.tls")
	}
}

// TestClientSchemeRecorded: status.tls records the client scheme the spec asks for and, once it saw it
// change, when; a pass that did not look at the certificates records it too.
func TestClientSchemeRecorded(t *testing.T) {
	at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	c := testutil.EtcdCluster("r", testutil.WithTLS(true, true))
	pass := func(now time.Time, o *TLSObservation) {
		applyTLSStatus(&scope{cluster: c, m: model.Build(model.Input{Cluster: c, Now: now}), report: &Report{TLS: o}})
	}
	pass(at, &TLSObservation{At: at, CANotAfter: at.Add(10 * 365 * 24 * time.Hour)})
	if st := c.Status.TLS; st == nil || st.ClientScheme != "https" || st.ClientSchemeChangedAt != nil {
		t.Fatalf("first pass: status.tls %+v; want clientScheme https without a change time", st)
	}
	c.Spec.TLS.Client.Enabled = false
	pass(at.Add(time.Minute), nil)
	if st := c.Status.TLS; st.ClientScheme != "http" || st.ClientSchemeChangedAt == nil || !st.ClientSchemeChangedAt.Time.Equal(at.Add(time.Minute)) {
		t.Fatalf("after the switch off: status.tls %+v; want clientScheme http changed at %v", st, at.Add(time.Minute))
	}
	pass(at.Add(time.Hour), &TLSObservation{At: at.Add(time.Hour), CANotAfter: at.Add(10 * 365 * 24 * time.Hour)})
	if st := c.Status.TLS; st.ClientScheme != "http" || st.ClientSchemeChangedAt == nil || !st.ClientSchemeChangedAt.Time.Equal(at.Add(time.Minute)) {
		t.Errorf("a later pass: status.tls %+v; want the change time kept (%v)", st, at.Add(time.Minute))
	}
}

// TestClientSchemeKeptWhileNoPodUsesTLS: switched off while the only member's pod is being recreated
// (no pod uses TLS), status.tls keeps the change until its grace period is over, so the pod comes back
// serving both schemes first.
func TestClientSchemeKeptWhileNoPodUsesTLS(t *testing.T) {
	at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	c := testutil.EtcdCluster("k", testutil.WithTLS(false, false), testutil.WithReplicas(1))
	c.Status.TLS = &etcdv1beta1.TLSStatus{ClientScheme: "http", ClientSchemeChangedAt: &metav1.Time{Time: at}}
	applyTLSStatus(&scope{cluster: c, m: model.Build(model.Input{Cluster: c, Now: at.Add(time.Minute)}), report: &Report{NoTLS: true}})
	if st := c.Status.TLS; st == nil || st.ClientScheme != "http" || st.ClientSchemeChangedAt == nil || !st.ClientSchemeChangedAt.Time.Equal(at) {
		t.Fatalf("a minute after the change: status.tls %+v; want the change kept", st)
	}
	if http, https, _ := model.Build(model.Input{Cluster: c, Now: at.Add(time.Minute)}).ClientTLS(); !http || !https {
		t.Errorf("the member recreated a minute after the change serves http %v https %v; want both", http, https)
	}
	applyTLSStatus(&scope{cluster: c, m: model.Build(model.Input{Cluster: c, Now: at.Add(time.Hour)}), report: &Report{NoTLS: true}})
	if c.Status.TLS != nil {
		t.Errorf("an hour after the change: status.tls %+v; want none", c.Status.TLS)
	}
}

// TestTLSStatusClearedWhenTLSIsOff: once neither the spec nor any member pod uses TLS (switched off),
// status.tls and the CertificatesExpiring condition go.
func TestTLSStatusClearedWhenTLSIsOff(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	c := &etcdv1beta1.EtcdCluster{}
	m := model.Build(model.Input{Cluster: c, Now: at})
	applyTLSStatus(&scope{cluster: c, m: m, report: &Report{TLS: &TLSObservation{At: at, CANotAfter: at.Add(10 * 365 * 24 * time.Hour)}}})
	if c.Status.TLS == nil || meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionCertificatesExpiring) == nil {
		t.Fatalf("status.tls %+v, conditions %+v; want both set", c.Status.TLS, c.Status.Conditions)
	}
	applyTLSStatus(&scope{cluster: c, m: m, report: &Report{NoTLS: true}})
	if c.Status.TLS != nil || meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionCertificatesExpiring) != nil {
		t.Errorf("status.tls %+v, conditions %+v; want both gone", c.Status.TLS, c.Status.Conditions)
	}
}

// TestClientTLSGrace: while every member serves both schemes within the grace period, the pass says
// until when and what clients must do, and looks again when it ends; nil otherwise.
func TestClientTLSGrace(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	both := resources.PodTLS{ClientHTTP: true, ClientHTTPS: true}
	build := func(clientTLS bool, created time.Time) *model.Cluster {
		c := testutil.EtcdCluster("g", testutil.WithTLS(clientTLS, false), testutil.WithReplicas(1))
		c.Status.TLS = &etcdv1beta1.TLSStatus{ClientScheme: map[bool]etcdv1beta1.URLScheme{true: etcdv1beta1.SchemeHTTPS, false: etcdv1beta1.SchemeHTTP}[clientTLS]}
		p := resources.Options{}.BuildPod(c, resources.Member{Name: "g-0", InitialClusterState: resources.StateNew, TLS: &both})
		p.CreationTimestamp = metav1.NewTime(created)
		return model.Build(model.Input{Cluster: c, Pods: []corev1.Pod{*p}, Now: now})
	}
	st := ClientTLSGrace(build(true, now.Add(-30*time.Second)))
	if st == nil || st.Reason != etcdv1beta1.ReasonSwitchingTLS || st.After != 90*time.Second ||
		!strings.Contains(st.Message, "from 2026-12-02T12:01:30Z on only https://") || !strings.Contains(st.Message, "client certificate (Secret g-client-tls)") {
		t.Errorf("switching on, 30 s into the grace period: %+v", st)
	}
	st = ClientTLSGrace(build(false, now.Add(-30*time.Second)))
	if st == nil || !strings.Contains(st.Message, "only http://: move clients to http://") || strings.Contains(st.Message, "certificate") {
		t.Errorf("switching off: %+v", st)
	}
	if st := ClientTLSGrace(build(true, now.Add(-time.Hour))); st != nil {
		t.Errorf("past the grace period: %+v, want nil", st)
	}
}
