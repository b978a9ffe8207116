package verdict

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
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
	} {
		got, reason := CertificatesExpiring(&tc.o)
		if got != tc.expiring || !strings.Contains(reason[1], tc.says) {
			t.Errorf("%s: expiring %v (%s); want %v, saying %q", tc.name, got, reason[1], tc.expiring, tc.says)
		}
		if want := etcdv1alpha1.ReasonCertificatesCurrent; !tc.expiring && reason[0] != want {
			t.Errorf("%s: reason %s, want %s", tc.name, reason[0], want)
		}
	}
}

func TestTLSStatusApplied(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	c := &etcdv1alpha1.EtcdCluster{}
	s := &scope{cluster: c, report: &Report{TLS: &TLSObservation{At: at, ClientSecret: "demo-client-tls",
		CANotAfter: at.Add(10 * 365 * 24 * time.Hour), NotAfter: at.Add(365 * 24 * time.Hour), RenewAt: at.Add(240 * 24 * time.Hour)}}}
	applyTLSStatus(s)
	st := c.Status.TLS
	if st == nil || st.ClientSecret != "demo-client-tls" || !st.NotAfter.Time.Equal(at.Add(365*24*time.Hour)) || st.RenewAt == nil || st.CANotAfter == nil {
		t.Fatalf("status.tls = %+v", st)
	}
	if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionCertificatesExpiring); cond == nil ||
		cond.Status != metav1.ConditionFalse || cond.Reason != etcdv1alpha1.ReasonCertificatesCurrent {
		t.Errorf("conditions %+v; want CertificatesExpiring False", c.Status.Conditions)
	}
	// a pass that did not look keeps what the status said
	applyTLSStatus(&scope{cluster: c, report: &Report{}})
	if c.Status.TLS != st {
		t.Error("a pass without an observation changed status.tls")
	}
}

func TestTLSMismatch(t *testing.T) {
	c := &etcdv1alpha1.EtcdCluster{}
	c.Name, c.Namespace, c.UID = "demo", "ns", "uid-1"
	c.Spec.TLS = &etcdv1alpha1.TLSSpec{Client: &etcdv1alpha1.TLSListenerSpec{Enabled: true}, Peer: &etcdv1alpha1.TLSListenerSpec{Enabled: true}}
	o := resources.Options{}
	pod := o.BuildPod(c, resources.Member{Name: "demo-0", InitialClusterState: resources.StateNew, InitialCluster: "x"})
	m := model.Build(model.Input{Cluster: c, Pods: []corev1.Pod{*pod}})
	if got := TLSMismatch(c, m); len(got) != 0 {
		t.Fatalf("members built from the spec: %v", got)
	}
	plain := c.DeepCopy()
	plain.Spec.TLS = nil // switched off around admission
	got := TLSMismatch(plain, m)
	if len(got) != 2 || !strings.Contains(got[0], "spec.tls.client.enabled is false but member demo-0 serves its client port with TLS") {
		t.Errorf("spec.tls removed under TLS members: %v; want both ports named", got)
	}
}
