package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// createsIn sums etcd_operator_api_writes_total{verb="create"} over every kind in namespace ns: the
// creates the operator sent there, refused ones included.
func createsIn(t *testing.T, ns string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != "etcd_operator_api_writes_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["verb"] == "create" && labels["namespace"] == ns {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// TestNamespaceTerminating: once the clusters' namespace is being deleted, the API server refuses every
// create in it (and there is no namespace controller here to delete the clusters). A cluster whose
// Service was deleted (its create refused as an error) and one whose member pod was deleted (refused
// as a step, podRefused) both say so in Progressing (NamespaceTerminating), log no error, and send no
// more creates, even when a change of the spec would have made new members. Before, each retried every
// refused create, with backoff or every 5 s, and the first logged each refusal as a "Reconciler error".
func TestNamespaceTerminating(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-nsdel"}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	var clusters []*etcdv1beta1.EtcdCluster
	for _, name := range []string{"nsdel", "nsdelp"} {
		c := testutil.EtcdCluster(name, testutil.InNamespace(ns.Name), testutil.WithReplicas(1))
		if err := k8s.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		retireAtEnd(t, c)
		clusters = append(clusters, c)
		testutil.Eventually(t, waitTimeout, "the pod of "+name, func(context.Context) error {
			_, err := getPod(c, name+"-0")
			return err
		})
	}
	logsBefore := len(operatorLogs.String())
	if err := k8s.Delete(ctx, ns); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "the namespace terminating", func(context.Context) error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(ns), ns); err != nil {
			return err
		}
		if ns.Status.Phase != corev1.NamespaceTerminating {
			return fmt.Errorf("phase %s", ns.Status.Phase)
		}
		return nil
	})
	// the operator makes each again in its next pass, and the API server refuses it
	gone := []client.Object{
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: resources.ClientServiceName(clusters[0])}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "nsdelp-0"}},
	}
	for _, o := range gone {
		if err := k8s.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range clusters {
		testutil.Eventually(t, waitTimeout, c.Name+": Progressing says the namespace is being deleted", func(context.Context) error {
			p := condition(getCluster(t, c), etcdv1beta1.ConditionProgressing)
			if p == nil || p.Status != metav1.ConditionFalse || p.Reason != etcdv1beta1.ReasonNamespaceTerminating ||
				!strings.Contains(p.Message, "Namespace "+ns.Name+" is being deleted") {
				return fmt.Errorf("progressing %+v", p)
			}
			return nil
		})
	}
	creates := createsIn(t, ns.Name)

	// a spec that asks two more members: a pass runs (it records the generation it saw) and creates
	// neither their claims nor their pods
	for _, c := range clusters {
		updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](3) })
	}
	for _, c := range clusters {
		testutil.Eventually(t, waitTimeout, c.Name+": the new generation observed", func(context.Context) error {
			now := getCluster(t, c)
			if now.Status.ObservedGeneration != now.Generation {
				return fmt.Errorf("observed generation %d of %d", now.Status.ObservedGeneration, now.Generation)
			}
			if p := condition(now, etcdv1beta1.ConditionProgressing); p == nil || p.Reason != etcdv1beta1.ReasonNamespaceTerminating || p.ObservedGeneration != now.Generation {
				return fmt.Errorf("progressing %+v", p)
			}
			return nil
		})
	}
	if n := createsIn(t, ns.Name); n != creates {
		t.Errorf("the operator sent %v creates to the terminating namespace after reporting it, want none", n-creates)
	}
	for _, l := range strings.Split(operatorLogs.String()[logsBefore:], "\n") {
		if strings.Contains(l, "Reconciler error") && strings.Contains(l, `"namespace":"`+ns.Name+`"`) {
			t.Errorf("an error was logged for the refused creates: %s", l)
		}
	}
}

// TestTerminatingClusters: a cluster is remembered by name and UID, for terminatingKept, until it is
// forgotten.
func TestTerminatingClusters(t *testing.T) {
	now := time.Now()
	c := testutil.EtcdCluster("tc", testutil.InNamespace("ns"), testutil.WithUID("uid-1"))
	again := testutil.EtcdCluster("tc", testutil.InNamespace("ns"), testutil.WithUID("uid-2"))
	var tc terminatingClusters
	if tc.has(c, now) {
		t.Fatal("remembered before it was added")
	}
	tc.add(c, now)
	switch {
	case !tc.has(c, now.Add(terminatingKept-time.Second)):
		t.Error("not remembered within terminatingKept")
	case tc.has(c, now.Add(terminatingKept)):
		t.Error("still remembered after terminatingKept: a misread refusal would stop the cluster for good")
	case tc.has(again, now):
		t.Error("a cluster of the same name and another UID (a namespace made again) is remembered")
	}
	tc.forget(client.ObjectKeyFromObject(c))
	if tc.has(c, now) {
		t.Error("remembered after forget")
	}
}

// TestCertificatesIssuedInOneEvent: a new cluster with TLS on both ports gets its CA and three leaf
// certificates in one pass, and one IssuedCertificate event names all four Secrets (one API write,
// where each Secret used to have an event of its own).
func TestCertificatesIssuedInOneEvent(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-issued"}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	c := testutil.EtcdCluster("iss", testutil.InNamespace(ns.Name), testutil.WithReplicas(1), testutil.WithTLS(true, true))
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	retireAtEnd(t, c)
	var notes []string
	testutil.Eventually(t, waitTimeout, "an IssuedCertificate event naming the four Secrets", func(ctx context.Context) error {
		list := &eventsv1.EventList{}
		if err := k8s.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
			return err
		}
		notes = nil
		for _, e := range list.Items {
			if e.Regarding.Name == c.Name && e.Reason == "IssuedCertificate" {
				notes = append(notes, e.Note)
			}
		}
		for _, n := range notes {
			if strings.Count(n, "Secret iss-") == 4 {
				return nil
			}
		}
		return fmt.Errorf("IssuedCertificate events %q", notes)
	})
	if len(notes) != 1 {
		t.Fatalf("%d IssuedCertificate events, want 1: %q", len(notes), notes)
	}
	for _, s := range []string{"iss-ca: created the cluster's certificate authority", "iss-server-tls: created", "iss-peer-tls: created", "iss-client-tls: created"} {
		if !strings.Contains(notes[0], "Secret "+s) {
			t.Errorf("the event does not say %q: %q", "Secret "+s, notes[0])
		}
	}
}

// TestNamespaceDeletionIsNoDataLoss: the namespace controller deletes a namespace's pods with it, and an
// emptyDir cluster's data goes with its pods. That is not reported as a quorum lost for good (a
// Warning event, the QuorumDataLost condition and alert): a dry run finds the namespace being deleted,
// and the cluster reports NamespaceTerminating instead.
func TestNamespaceDeletionIsNoDataLoss(t *testing.T) {
	ctx := context.Background()
	c, members, names, _ := runningCluster(t,
		testutil.EtcdCluster("nsgone", testutil.InNamespace("ns-nsgone"), testutil.WithReplicas(1), testutil.WithEmptyDir()), "127.0.0.235")
	if err := k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.Namespace}}); err != nil {
		t.Fatal(err)
	}
	members[0].Stop()
	p, err := getPod(c, names[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "NamespaceTerminating reported", func(context.Context) error {
		got := getCluster(t, c)
		if p := condition(got, etcdv1beta1.ConditionProgressing); p == nil || p.Reason != etcdv1beta1.ReasonNamespaceTerminating {
			return fmt.Errorf("progressing %+v", p)
		}
		if q := condition(got, etcdv1beta1.ConditionQuorumDataLost); q != nil && q.Status == metav1.ConditionTrue {
			return fmt.Errorf("QuorumDataLost %+v", q)
		}
		return nil
	})
}
