package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// TestNamespaceTerminating: once the cluster's namespace is being deleted, the API server refuses every
// create in it (and there is no namespace controller here to delete the cluster). The operator says so
// in Progressing (NamespaceTerminating), logs no error, and sends no more creates, even when a change
// of the spec would have made new members; before, it retried every refused create with backoff and
// logged each refusal as a "Reconciler error".
func TestNamespaceTerminating(t *testing.T) {
	ctx := context.Background()
	c := createCluster(t, "nsdel", 1)
	testutil.Eventually(t, waitTimeout, "the member's pod", func(context.Context) error {
		_, err := getPod(c, "nsdel-0")
		return err
	})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.Namespace}}
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
	// the operator makes the client Service again in its next pass, and the API server refuses it
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: resources.ClientServiceName(c)}}
	if err := k8s.Delete(ctx, svc); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "Progressing says the namespace is being deleted", func(context.Context) error {
		p := condition(getCluster(t, c), etcdv1beta1.ConditionProgressing)
		if p == nil || p.Status != metav1.ConditionFalse || p.Reason != etcdv1beta1.ReasonNamespaceTerminating ||
			!strings.Contains(p.Message, "Namespace "+c.Namespace+" is being deleted") {
			return fmt.Errorf("progressing %+v", p)
		}
		return nil
	})
	creates := createsIn(t, c.Namespace)

	// a spec that asks two more members: a pass runs (it records the generation it saw) and creates
	// neither their claims nor their pods
	got := getCluster(t, c)
	got.Spec.Replicas = new(int32(3))
	if err := k8s.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "the new generation observed", func(context.Context) error {
		now := getCluster(t, c)
		if now.Status.ObservedGeneration != now.Generation {
			return fmt.Errorf("observed generation %d of %d", now.Status.ObservedGeneration, now.Generation)
		}
		if p := condition(now, etcdv1beta1.ConditionProgressing); p == nil || p.Reason != etcdv1beta1.ReasonNamespaceTerminating || p.ObservedGeneration != now.Generation {
			return fmt.Errorf("progressing %+v", p)
		}
		return nil
	})
	if n := createsIn(t, c.Namespace); n != creates {
		t.Errorf("the operator sent %v creates to the terminating namespace after reporting it, want none", n-creates)
	}
	for _, l := range strings.Split(operatorLogs.String()[logsBefore:], "\n") {
		if strings.Contains(l, "Reconciler error") && strings.Contains(l, `"namespace":"`+c.Namespace+`"`) {
			t.Errorf("an error was logged for the refused creates: %s", l)
		}
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
	// the events of one recorder are sent in order: once the member's is there, the certificates' are
	testutil.Eventually(t, waitTimeout, "the CreatedMembers event", func(ctx context.Context) error {
		return findEvent(ctx, c, corev1.EventTypeNormal, "CreatedMembers", "iss-0")
	})
	list := &eventsv1.EventList{}
	if err := k8s.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Name == c.Name && e.Reason == "IssuedCertificate" {
			notes = append(notes, e.Note)
		}
	}
	if len(notes) != 1 {
		t.Fatalf("%d IssuedCertificate events, want 1: %q", len(notes), notes)
	}
	for _, s := range []string{"iss-ca: created the cluster's certificate authority", "iss-server-tls: created", "iss-peer-tls: created", "iss-client-tls: created"} {
		if !strings.Contains(notes[0], "Secret "+s) {
			t.Errorf("the event does not say %q: %q", "Secret "+s, notes[0])
		}
	}
}
