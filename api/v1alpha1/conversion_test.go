package v1alpha1_test

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"
	"sigs.k8s.io/controller-runtime/pkg/conversion"
	"sigs.k8s.io/randfill"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// roundTrips is how many random objects of each kind and direction TestRoundTrip converts.
const roundTrips = 2000

// filler fills objects with random values the schemas admit where a conversion could depend on them
// (the compaction modes are enums), and random values elsewhere. Quantities and durations get random
// amounts: their Go structs hold caches a random fill would make inconsistent.
func filler(seed int64) *randfill.Filler {
	return randfill.NewWithSeed(seed).NilChance(0.3).NumElements(0, 3).MaxDepth(12).Funcs(
		func(m *etcdv1alpha1.AutoCompactionMode, c randfill.Continue) {
			*m = []etcdv1alpha1.AutoCompactionMode{"", "periodic", "revision"}[c.Intn(3)]
		},
		func(m *etcdv1beta1.AutoCompactionMode, c randfill.Continue) {
			*m = []etcdv1beta1.AutoCompactionMode{"", etcdv1beta1.AutoCompactionPeriodic, etcdv1beta1.AutoCompactionRevision}[c.Intn(3)]
		},
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewQuantity(c.Int63n(1<<40), []resource.Format{resource.BinarySI, resource.DecimalSI}[c.Intn(2)])
		},
		func(d *metav1.Duration, c randfill.Continue) {
			d.Duration = time.Duration(c.Int63n(int64(1000 * time.Hour)))
		},
		// The API machinery sets apiVersion and kind, not a conversion.
		func(*metav1.TypeMeta, randfill.Continue) {},
		func(m *metav1.ObjectMeta, c randfill.Continue) {
			c.FillNoCustom(m)
			m.ManagedFields = nil // their FieldsV1 holds raw JSON a random fill makes invalid
		},
	)
}

// convertible is a version of a kind that converts to and from the hub.
type convertible interface {
	conversion.Convertible
}

// TestRoundTrip: every EtcdCluster and EtcdBackup converts from v1alpha1 to v1beta1 and back, and
// from v1beta1 to v1alpha1 and back, to an object equal to the one it started as (random objects,
// seeded: a failure names its seed).
func TestRoundTrip(t *testing.T) {
	for i := range int64(roundTrips) {
		alphaRoundTrip(t, i, &etcdv1alpha1.EtcdCluster{}, &etcdv1beta1.EtcdCluster{}, &etcdv1alpha1.EtcdCluster{})
		alphaRoundTrip(t, i, &etcdv1alpha1.EtcdBackup{}, &etcdv1beta1.EtcdBackup{}, &etcdv1alpha1.EtcdBackup{})
		betaRoundTrip(t, i, &etcdv1beta1.EtcdCluster{}, &etcdv1alpha1.EtcdCluster{}, &etcdv1beta1.EtcdCluster{})
		betaRoundTrip(t, i, &etcdv1beta1.EtcdBackup{}, &etcdv1alpha1.EtcdBackup{}, &etcdv1beta1.EtcdBackup{})
		if t.Failed() {
			return
		}
	}
}

// alphaRoundTrip fills in with seed, converts it to hub and back into out, and fails unless out
// equals in.
func alphaRoundTrip(t *testing.T, seed int64, in convertible, hub conversion.Hub, out convertible) {
	t.Helper()
	filler(seed).Fill(in)
	if err := in.ConvertTo(hub); err != nil {
		t.Fatalf("seed %d: %T to v1beta1: %v", seed, in, err)
	}
	if err := out.ConvertFrom(hub); err != nil {
		t.Fatalf("seed %d: %T from v1beta1: %v", seed, out, err)
	}
	if !equality.Semantic.DeepEqual(in, out) {
		t.Errorf("seed %d: %T changed on its way through v1beta1:\n%s", seed, in, diff.Diff(in, out))
	}
}

// betaRoundTrip fills in with seed, converts it into spoke and back into out, and fails unless out
// equals in.
func betaRoundTrip(t *testing.T, seed int64, in conversion.Hub, spoke convertible, out conversion.Hub) {
	t.Helper()
	filler(seed).Fill(in)
	if err := spoke.ConvertFrom(in); err != nil {
		t.Fatalf("seed %d: %T to v1alpha1: %v", seed, in, err)
	}
	if err := spoke.ConvertTo(out); err != nil {
		t.Fatalf("seed %d: %T from v1alpha1: %v", seed, out, err)
	}
	if !equality.Semantic.DeepEqual(in, out) {
		t.Errorf("seed %d: %T changed on its way through v1alpha1:\n%s", seed, in, diff.Diff(in, out))
	}
}

// TestConvertFields: the fields whose encoding differs between the versions, and some that must not.
func TestConvertFields(t *testing.T) {
	for _, tc := range []struct {
		alpha etcdv1alpha1.AutoCompactionMode
		beta  etcdv1beta1.AutoCompactionMode
	}{
		{"periodic", etcdv1beta1.AutoCompactionPeriodic},
		{"revision", etcdv1beta1.AutoCompactionRevision},
		{"", ""},
	} {
		a := &etcdv1alpha1.EtcdCluster{Spec: etcdv1alpha1.EtcdClusterSpec{Options: &etcdv1alpha1.EtcdOptions{
			AutoCompactionMode: tc.alpha, AutoCompactionRetention: "1h"}}}
		b := &etcdv1beta1.EtcdCluster{}
		if err := a.ConvertTo(b); err != nil {
			t.Fatal(err)
		}
		if got := b.Spec.Options.AutoCompactionMode; got != tc.beta {
			t.Errorf("v1alpha1 autoCompactionMode %q became %q in v1beta1, want %q", tc.alpha, got, tc.beta)
		}
		if got := b.Spec.Options.AutoCompactionMode.Flag(); got != string(tc.alpha) {
			t.Errorf("v1beta1 %q gives etcd --auto-compaction-mode=%s, want %s", tc.beta, got, tc.alpha)
		}
		back := &etcdv1alpha1.EtcdCluster{}
		if err := back.ConvertFrom(b); err != nil {
			t.Fatal(err)
		}
		if got := back.Spec.Options.AutoCompactionMode; got != tc.alpha {
			t.Errorf("v1beta1 autoCompactionMode %q became %q in v1alpha1, want %q", tc.beta, got, tc.alpha)
		}
	}

	// Everything else is carried as it is: the metadata, the status, references by name.
	a := &etcdv1alpha1.EtcdCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: "etcd.etcdkit.dev/v1alpha1", Kind: "EtcdCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "apps", UID: "u1", ResourceVersion: "7", Generation: 3, Labels: map[string]string{"team": "a"}},
		Status: etcdv1alpha1.EtcdClusterStatus{ObservedGeneration: 3, Phase: etcdv1alpha1.PhaseRunning, ClusterID: "abc",
			TLS: &etcdv1alpha1.TLSStatus{ClientScheme: "https", CARotation: &etcdv1alpha1.CARotationStatus{Phase: etcdv1alpha1.CARotationDropOldCA}}},
	}
	b := &etcdv1beta1.EtcdCluster{TypeMeta: metav1.TypeMeta{APIVersion: "etcd.etcdkit.dev/v1beta1", Kind: "EtcdCluster"}}
	if err := a.ConvertTo(b); err != nil {
		t.Fatal(err)
	}
	if b.APIVersion != "etcd.etcdkit.dev/v1beta1" {
		t.Errorf("the converted object says apiVersion %q, want etcd.etcdkit.dev/v1beta1", b.APIVersion)
	}
	if b.Name != "demo" || b.UID != "u1" || b.ResourceVersion != "7" || b.Generation != 3 || b.Labels["team"] != "a" {
		t.Errorf("metadata not carried: %+v", b.ObjectMeta)
	}
	if s := b.Status; s.Phase != etcdv1beta1.PhaseRunning || s.ClusterID != "abc" || s.TLS.ClientScheme != etcdv1beta1.SchemeHTTPS ||
		s.TLS.CARotation.Phase != etcdv1beta1.CARotationDropOldCA {
		t.Errorf("status not carried: %+v, TLS %+v", s, s.TLS)
	}

	bk := &etcdv1alpha1.EtcdBackup{Spec: etcdv1alpha1.EtcdBackupSpec{ClusterRef: corev1Ref("demo")}}
	hub := &etcdv1beta1.EtcdBackup{}
	if err := bk.ConvertTo(hub); err != nil {
		t.Fatal(err)
	}
	if hub.Spec.ClusterRef.Name != "demo" {
		t.Errorf("spec.clusterRef %+v, want name demo", hub.Spec.ClusterRef)
	}
}

// TestSameFields: the versions have the same JSON fields (a field added to one only would be lost
// on the way through the other, and TestRoundTrip would have to fill it to notice).
func TestSameFields(t *testing.T) {
	for _, pair := range [][2]any{
		{&etcdv1alpha1.EtcdCluster{}, &etcdv1beta1.EtcdCluster{}},
		{&etcdv1alpha1.EtcdBackup{}, &etcdv1beta1.EtcdBackup{}},
	} {
		a, b := fields(t, pair[0]), fields(t, pair[1])
		for f := range a {
			if !b[f] {
				t.Errorf("%T has %s, v1beta1 does not", pair[0], f)
			}
		}
		for f := range b {
			if !a[f] {
				t.Errorf("%T has %s, v1alpha1 does not", pair[1], f)
			}
		}
	}
}

// fields returns the JSON paths of obj filled with every field set.
func fields(t *testing.T, obj any) map[string]bool {
	t.Helper()
	randfill.NewWithSeed(1).NilChance(0).NumElements(1, 1).MaxDepth(30).Funcs(
		func(q *resource.Quantity, _ randfill.Continue) { *q = resource.MustParse("1") },
		func(s *string, _ randfill.Continue) { *s = "x" }, // not empty: omitempty would hide the field
		func(*metav1.ObjectMeta, randfill.Continue) {},
	).Fill(obj)
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var m any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	var walk func(string, any)
	walk = func(p string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				walk(p+"."+k, e)
			}
		case []any:
			for _, e := range v {
				walk(p+"[]", e)
			}
		default:
			out[p] = true
		}
	}
	walk("", m)
	return out
}

func corev1Ref(name string) corev1.LocalObjectReference {
	return corev1.LocalObjectReference{Name: name}
}
