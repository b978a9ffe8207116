package model

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

var (
	plain  = resources.PodTLS{ClientHTTP: true}
	both   = resources.PodTLS{ClientHTTP: true, ClientHTTPS: true}
	secure = resources.PodTLS{ClientHTTPS: true}
)

// memberPod builds the pod of member name of c serving as t, created at created.
func memberPod(c *etcdv1beta1.EtcdCluster, name string, t resources.PodTLS, created time.Time) corev1.Pod {
	p := resources.Options{}.BuildPod(c, resources.Member{Name: name, InitialClusterState: resources.StateNew, TLS: &t})
	p.CreationTimestamp = metav1.NewTime(created)
	return *p
}

// TestClientTLSSwitch walks the client port through a switch on, and back off midway: every member
// serves both schemes until none serves the old one alone and the newest has done so for the grace
// period; then only the spec's scheme, also once any member does.
func TestClientTLSSwitch(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	// the status records the spec's scheme, as after the operator's first pass since the change
	on := changedBack(testutil.EtcdCluster("s", testutil.WithTLS(true, false)), "https", time.Time{})
	off := changedBack(testutil.EtcdCluster("s", testutil.WithTLS(false, false)), "http", time.Time{})
	names := []string{"s-0", "s-1", "s-2"}
	for _, tc := range []struct {
		name      string
		c         *etcdv1beta1.EtcdCluster
		pods      []resources.PodTLS
		ages      []time.Duration // of each pod; an hour when missing
		want      resources.PodTLS
		graceEnds time.Time
	}{
		{"steady plain text", off, []resources.PodTLS{plain, plain, plain}, nil, plain, time.Time{}},
		{"switched on: every member serves both first", on, []resources.PodTLS{plain, plain, plain}, nil, both, time.Time{}},
		{"one member left that serves plain text only", on, []resources.PodTLS{both, both, plain}, nil, both, time.Time{}},
		{"all serve both, the newest for a minute: the grace period runs", on, []resources.PodTLS{both, both, both},
			[]time.Duration{time.Hour, time.Minute, 2 * time.Hour}, both, now.Add(time.Minute)},
		{"all serve both past the grace period", on, []resources.PodTLS{both, both, both},
			[]time.Duration{3 * time.Minute, time.Hour, time.Hour}, secure, time.Time{}},
		{"the last stage is under way", on, []resources.PodTLS{secure, both, both}, []time.Duration{0, 0, 0}, secure, time.Time{}},
		{"steady TLS", on, []resources.PodTLS{secure, secure, secure}, nil, secure, time.Time{}},
		{"switched back off midway: both again first", off, []resources.PodTLS{secure, both, both}, nil, both, time.Time{}},
		{"no pod yet", on, nil, nil, secure, time.Time{}},
		{"the last stage: a member recreated to serve TLS only has no pod yet", on,
			[]resources.PodTLS{both, both}, []time.Duration{time.Hour, time.Hour}, secure, time.Time{}},
		{"changed back off during the last stage, seen now: the member that served TLS only has no pod yet", changedBack(off, "https", time.Time{}),
			[]resources.PodTLS{both, both}, []time.Duration{time.Hour, time.Hour}, both, now.Add(DefaultTLSSwitchGrace)},
		{"changed back off a minute ago: the grace period counts from the change", changedBack(off, "http", now.Add(-time.Minute)),
			[]resources.PodTLS{both, both, both}, []time.Duration{time.Hour, time.Hour, time.Hour}, both, now.Add(time.Minute)},
		{"changed back off an hour ago: the grace period is over", changedBack(off, "http", now.Add(-time.Hour)),
			[]resources.PodTLS{both, both, both}, []time.Duration{time.Hour, time.Hour, time.Hour}, plain, time.Time{}},
		{"a pod newer than the change: the grace period counts from the pod", changedBack(on, "https", now.Add(-time.Hour)),
			[]resources.PodTLS{both, both, both}, []time.Duration{time.Hour, time.Minute, time.Hour}, both, now.Add(time.Minute)},
		{"1 member switched on a minute ago, its pod being recreated: it serves both first", changedBack(on, "https", now.Add(-time.Minute)),
			nil, nil, both, now.Add(time.Minute)},
		{"1 member changed back off during the last stage, its pod being recreated", changedBack(off, "https", time.Time{}),
			nil, nil, both, now.Add(DefaultTLSSwitchGrace)},
		{"1 member switched on an hour ago, its pod being recreated: the grace period is over", changedBack(on, "https", now.Add(-time.Hour)),
			nil, nil, secure, time.Time{}},
		{"no change recorded (an older operator wrote the status) while members serve both: from now on", changedBack(off, "", time.Time{}),
			[]resources.PodTLS{both, both}, []time.Duration{time.Hour, time.Hour}, both, now.Add(DefaultTLSSwitchGrace)},
		{"no change recorded and every member serves the spec's scheme: none under way", changedBack(on, "", time.Time{}),
			[]resources.PodTLS{secure, secure, secure}, nil, secure, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pods []corev1.Pod
			for i, pt := range tc.pods {
				age := time.Hour
				if i < len(tc.ages) {
					age = tc.ages[i]
				}
				pods = append(pods, memberPod(tc.c, names[i], pt, now.Add(-age)))
			}
			m := Build(Input{Cluster: tc.c, Pods: pods, Now: now})
			http, https, ends := m.ClientTLS()
			if http != tc.want.ClientHTTP || https != tc.want.ClientHTTPS || !ends.Equal(tc.graceEnds) {
				t.Errorf("ClientTLS() = http %v https %v grace ends %v, want %v %v %v", http, https, ends, tc.want.ClientHTTP, tc.want.ClientHTTPS, tc.graceEnds)
			}
		})
	}

	// the options set the grace period
	c := on
	pods := []corev1.Pod{memberPod(c, "s-0", both, now.Add(-10*time.Second))}
	m := Build(Input{Cluster: c, Pods: pods, Now: now, Options: resources.Options{TLSSwitchGrace: 5 * time.Second}})
	if _, https, ends := m.ClientTLS(); !https || !ends.IsZero() {
		t.Errorf("a 5 s grace period 10 s after the pod: https %v grace ends %v, want https only", https, ends)
	}
}

// changedBack returns a copy of c whose status.tls records client scheme scheme, changed at changed (none
// when zero); no status.tls when scheme is empty.
func changedBack(c *etcdv1beta1.EtcdCluster, scheme string, changed time.Time) *etcdv1beta1.EtcdCluster {
	c = c.DeepCopy()
	if scheme == "" {
		c.Status.TLS = nil
		return c
	}
	c.Status.TLS = &etcdv1beta1.TLSStatus{ClientScheme: etcdv1beta1.URLScheme(scheme)}
	if !changed.IsZero() {
		c.Status.TLS.ClientSchemeChangedAt = &metav1.Time{Time: changed}
	}
	return c
}

// TestDesiredPeerTLS: each member's peer port serves the scheme of its peer URL in etcd's member list
// (the status's when etcd does not answer); every member carries the peer certificate while the spec
// asks for peer TLS or any peer URL is https://; a new member joins in plain text until every member's
// peer URL is https://.
func TestDesiredPeerTLS(t *testing.T) {
	on := testutil.EtcdCluster("p", testutil.WithTLS(false, true))
	off := testutil.EtcdCluster("p", testutil.WithTLS(false, false))
	opts := resources.Options{}
	urls := func(c *etcdv1beta1.EtcdCluster, https ...bool) *Etcd {
		e := &Etcd{ClusterID: 1, Leader: 1, Health: map[uint64]error{}}
		for i, h := range https {
			name := resources.MemberName(c, i)
			e.Members = append(e.Members, etcd.Member{ID: uint64(i + 1), Name: name, PeerURLs: []string{opts.PeerURLScheme(c, name, h)}})
		}
		return e
	}
	for _, tc := range []struct {
		name      string
		c         *etcdv1beta1.EtcdCluster
		recorded  []bool
		certs     bool
		listeners []bool // of p-0, p-1, p-2 and a new member p-3
	}{
		{"switched on: certificates first", on, []bool{false, false, false}, true, []bool{false, false, false, false}},
		{"one member switched", on, []bool{true, false, false}, true, []bool{true, false, false, false}},
		{"all switched: a new member joins with TLS", on, []bool{true, true, true}, true, []bool{true, true, true, true}},
		{"switched off: certificates kept while a peer URL is https", off, []bool{false, true, true}, true, []bool{false, true, true, false}},
		{"switched off: done", off, []bool{false, false, false}, false, []bool{false, false, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Build(Input{Cluster: tc.c, Etcd: urls(tc.c, tc.recorded...), Options: opts})
			for i, want := range tc.listeners {
				got := m.DesiredTLS(resources.MemberName(tc.c, i))
				if got.PeerHTTPS != want || got.PeerCertificates != tc.certs || got.ClientHTTPS || !got.ClientHTTP {
					t.Errorf("DesiredTLS(%s) = %+v, want peer https %v, certificates %v, plain-text client port", resources.MemberName(tc.c, i), got, want, tc.certs)
				}
			}
			if got, want := m.NewMemberPeerHTTPS(), tc.listeners[3]; got != want {
				t.Errorf("NewMemberPeerHTTPS() = %v, want %v", got, want)
			}
			view := m.PeerSwitch()
			for i, mem := range view.Members {
				if mem.UpToDate != (tc.recorded[i] == tc.c.Spec.PeerTLS()) {
					t.Errorf("peer switch view of %s: up to date %v with peer URL https %v", mem.Name, mem.UpToDate, tc.recorded[i])
				}
			}
		})
	}

	// a peer URL the operator did not give (a member started by hand at an address) is not switched: the
	// spec says how its pod serves
	foreign := Build(Input{Cluster: on, Etcd: &Etcd{ClusterID: 1, Leader: 1, Health: map[uint64]error{},
		Members: []etcd.Member{{ID: 1, Name: "p-0", PeerURLs: []string{"http://127.0.0.1:2380"}}}}})
	if _, known := foreign.RecordedPeerHTTPS("p-0"); known || !foreign.DesiredTLS("p-0").PeerHTTPS || !foreign.PeerSwitch().Members[0].UpToDate {
		t.Errorf("a foreign peer URL: DesiredTLS %+v, switch view %+v; want the spec's TLS and nothing to switch", foreign.DesiredTLS("p-0"), foreign.PeerSwitch().Members)
	}

	// etcd did not answer: the status's peer URLs say
	c := on.DeepCopy()
	c.Status.Members = []etcdv1beta1.MemberStatus{{Name: "p-0", PeerURL: opts.PeerURLScheme(c, "p-0", true)}, {Name: "p-1", PeerURL: opts.PeerURLScheme(c, "p-1", false)}}
	m := Build(Input{Cluster: c, EtcdErr: ErrNotObserved})
	if !m.DesiredTLS("p-0").PeerHTTPS || m.DesiredTLS("p-1").PeerHTTPS || m.NewMemberPeerHTTPS() {
		t.Errorf("from the status: p-0 %+v p-1 %+v new member https %v; want https, plain text, plain text",
			m.DesiredTLS("p-0"), m.DesiredTLS("p-1"), m.NewMemberPeerHTTPS())
	}
}

// TestPodCurrent: a pod is current when it carries the spec hash and serves TLS as DesiredTLS says; a
// pod of the right hash that serves the client port otherwise is rolled.
func TestPodCurrent(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	c := testutil.EtcdCluster("r", testutil.WithTLS(true, false))
	opts := resources.Options{}
	hash := opts.SpecHash(c)
	pods := []corev1.Pod{memberPod(c, "r-0", both, now.Add(-time.Hour)), memberPod(c, "r-1", plain, now.Add(-time.Hour))}
	m := Build(Input{Cluster: c, Pods: pods, Now: now})
	if !m.PodCurrent(m.Member("r-0"), hash) {
		t.Errorf("r-0 serves both schemes while r-1 serves plain text only: want current")
	}
	if m.PodCurrent(m.Member("r-1"), hash) {
		t.Errorf("r-1 serves plain text only during a switch on: want rolled")
	}
	if m.PodCurrent(m.Member("r-0"), "other") {
		t.Errorf("r-0 with another spec hash: want rolled")
	}
}
