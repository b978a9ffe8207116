package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestEmptySpecHashUpdatedWithoutRoll: the operator used to hash an empty spec.podTemplate ({}) apart
// from an absent one, although both build the same pods. Pods that carry that hash get the current
// one written onto them, and so does a claim's rolled-onto record (which then goes, as the member
// serves on that spec); no member is restarted.
func TestEmptySpecHashUpdatedWithoutRoll(t *testing.T) {
	c := createCluster(t, "emptytmpl", 3)
	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.PodTemplate = &etcdv1beta1.PodTemplate{} })
	names := []string{"emptytmpl-0", "emptytmpl-1", "emptytmpl-2"}
	hosts := []string{"127.0.0.147", "127.0.0.148", "127.0.0.149"}
	testenv.StartEtcd(t, names, hosts)
	runPods(t, c, map[string]string{names[0]: hosts[0], names[1]: hosts[1], names[2]: hosts[2]})
	c = waitAvailable(t, c, 3)

	ctx := context.Background()
	hash, prev := resources.Options{}.SpecHash(c), resources.Options{}.EmptySpecHash(c)
	if prev == "" || prev == hash {
		t.Fatalf("EmptySpecHash %q, SpecHash %q: want an earlier hash that differs", prev, hash)
	}
	// the state an earlier operator left: every pod, and one claim's record, on the earlier hash
	uids, _ := podAndClaimUIDs(t, c, names)
	for _, n := range names {
		p, err := getPod(c, n)
		if err != nil {
			t.Fatal(err)
		}
		setAnnotation(t, p, etcdv1beta1.AnnotationSpecHash, prev)
	}
	claim := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.PVCName(names[1])}, claim); err != nil {
		t.Fatal(err)
	}
	setAnnotation(t, claim, etcdv1beta1.AnnotationRolledOnto, prev)

	testutil.Eventually(t, waitTimeout, "the current hash on every pod, none left on the claim", func(context.Context) error {
		for _, n := range names {
			p, err := getPod(c, n)
			if err != nil {
				return err
			}
			if p.UID != uids[n] || p.DeletionTimestamp != nil {
				return fmt.Errorf("pod %s was restarted", n)
			}
			if got := p.Annotations[etcdv1beta1.AnnotationSpecHash]; got != hash {
				return fmt.Errorf("pod %s has spec hash %s, want %s", n, got, hash)
			}
		}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
			return err
		}
		// the record moves onto the current hash, and then goes, as the member serves on it
		if got, ok := claim.Annotations[etcdv1beta1.AnnotationRolledOnto]; ok && got != hash {
			return fmt.Errorf("claim %s rolled onto %s, want %s or no record", claim.Name, got, hash)
		}
		return nil
	})
	c = waitAvailable(t, c, 3)
	if p := condition(c, etcdv1beta1.ConditionProgressing); p != nil && (p.Reason == etcdv1beta1.ReasonRollingUpdate || p.Reason == etcdv1beta1.ReasonRolloutPaused) {
		t.Errorf("Progressing %s: %s; want no rolling update", p.Reason, p.Message)
	}
	if restarts := eventsSince(t, c, "UpdatingMember", time.Time{}); len(restarts) > 0 {
		t.Errorf("events UpdatingMember %q, want no member restarted", restarts)
	}
}

// setAnnotation sets annotation key of obj to value, as stored.
func setAnnotation(t *testing.T, obj client.Object, key, value string) {
	t.Helper()
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	obj.SetAnnotations(resources.Merged(obj.GetAnnotations(), map[string]string{key: value}))
	if err := k8s.Patch(context.Background(), obj, patch); err != nil {
		t.Fatalf("annotate %s: %v", obj.GetName(), err)
	}
}

// TestRecreatedStep: a pod recreated for the rolling update reads as the rolling update, one recreated
// by a repair as a repair, in the singular for one member.
func TestRecreatedStep(t *testing.T) {
	for _, tc := range []struct {
		recreated, rolled, waiting []string
		reason, message            string
	}{
		{[]string{"d-1"}, nil, nil, etcdv1beta1.ReasonRecreatingMember, "Recreated the pod of d-1 on its data; waiting for it to rejoin"},
		{[]string{"d-1", "d-2"}, nil, nil, etcdv1beta1.ReasonRecreatingMember, "Recreated the pods of d-1, d-2 on their data; waiting for them to rejoin"},
		{nil, []string{"d-0"}, nil, etcdv1beta1.ReasonRollingUpdate, "Rolling update: recreated the pod of d-0 on its data with the current spec; waiting for it to serve"},
		{nil, nil, []string{"d-2"}, etcdv1beta1.ReasonRecreatingMember, "Waiting for the failed or down member pods d-2 to go before recreating them"},
	} {
		st := recreatedStep(tc.recreated, tc.rolled, tc.waiting)
		if st == nil || st.Reason != tc.reason || st.Message != tc.message {
			t.Errorf("recreatedStep(%v, %v, %v) = %+v, want %s %q", tc.recreated, tc.rolled, tc.waiting, st, tc.reason, tc.message)
		}
	}
	if st := recreatedStep(nil, nil, nil); st != nil {
		t.Errorf("nothing done: step %+v, want none", st)
	}
}
