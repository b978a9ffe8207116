//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestAPIVersions: on a real cluster, an EtcdCluster created in the deprecated v1alpha1 (with a
// warning) runs like any other and reads in both versions, each spelling autoCompactionMode its own
// way: the API server converts through the operator's conversion webhook, which the operator keeps
// its CRDs pointed at (its Service, the caBundle of its webhooks). The objects stored before are moved
// to v1beta1, which the CRDs record as their only stored version.
func TestAPIVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ns, name = "e2e-api-versions", "legacy"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logOperatorAbout(t, ns)
			return
		}
		_ = k8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})

	cfg := rest.CopyConfig(config)
	warned := &testutil.Warnings{}
	cfg.WarningHandlerWithContext = warned
	legacyClient, err := client.New(cfg, client.Options{Scheme: testenv.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	alpha := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: ptr.To[int32](1),
			Options: &etcdv1alpha1.EtcdOptions{AutoCompactionMode: "periodic", AutoCompactionRetention: "30m"}}}
	if err := legacyClient.Create(ctx, alpha); err != nil {
		t.Fatalf("create an EtcdCluster in v1alpha1: %v", err)
	}
	if w := strings.Join(warned.Take(), "\n"); !strings.Contains(w, "etcd.etcdkit.dev/v1alpha1 EtcdCluster is deprecated") {
		t.Errorf("creating in v1alpha1 warned %q, want the deprecation warning", w)
	}
	took, c := assertAvailable(t, &etcdv1beta1.EtcdCluster{ObjectMeta: alpha.ObjectMeta, Spec: etcdv1beta1.EtcdClusterSpec{Replicas: ptr.To[int32](1)}}, 3*time.Minute)
	t.Logf("the v1alpha1 cluster is Available %s after its creation", took.Round(100*time.Millisecond))
	if o := c.Spec.Options; o == nil || o.AutoCompactionMode != etcdv1beta1.AutoCompactionPeriodic || o.AutoCompactionRetention != "30m" {
		t.Errorf("read in v1beta1, spec.options is %+v, want Periodic 30m", c.Spec.Options)
	}
	pods, err := memberPods(ctx, c)
	if err != nil || len(pods) != 1 {
		t.Fatalf("member pods: %v, err %v", pods, err)
	}
	for _, p := range pods {
		if !containsArg(p.Spec.Containers[0].Command, "--auto-compaction-mode=periodic") &&
			!containsArg(p.Spec.Containers[0].Args, "--auto-compaction-mode=periodic") {
			t.Errorf("member %s runs without --auto-compaction-mode=periodic: %v %v", p.Name, p.Spec.Containers[0].Command, p.Spec.Containers[0].Args)
		}
	}
	back := &etcdv1alpha1.EtcdCluster{}
	if err := legacyClient.Get(ctx, client.ObjectKeyFromObject(alpha), back); err != nil {
		t.Fatalf("read in v1alpha1: %v", err)
	}
	if back.Status.Phase != etcdv1alpha1.PhaseRunning || back.Status.ClusterID != c.Status.ClusterID || back.Spec.Options.AutoCompactionMode != "periodic" {
		t.Errorf("read in v1alpha1: phase %s, cluster ID %s (v1beta1: %s), autoCompactionMode %q; want Running, the same ID, periodic",
			back.Status.Phase, back.Status.ClusterID, c.Status.ClusterID, back.Spec.Options.AutoCompactionMode)
	}

	// The CRDs convert through the operator and store v1beta1 only.
	poll.Eventually(t, 2*time.Minute, "both CRDs store v1beta1 only and convert through the operator", func(ctx context.Context) error {
		for _, n := range []string{"etcdclusters.etcd.etcdkit.dev", "etcdbackups.etcd.etcdkit.dev"} {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := k8s.Get(ctx, client.ObjectKey{Name: n}, crd); err != nil {
				return err
			}
			if !slices.Equal(crd.Status.StoredVersions, []string{"v1beta1"}) {
				return fmt.Errorf("CRD %s: storedVersions %v", n, crd.Status.StoredVersions)
			}
			conv := crd.Spec.Conversion
			if conv == nil || conv.Webhook == nil || conv.Webhook.ClientConfig == nil || conv.Webhook.ClientConfig.Service == nil ||
				conv.Webhook.ClientConfig.Service.Namespace != "etcd-operator-system" || len(conv.Webhook.ClientConfig.CABundle) == 0 {
				return fmt.Errorf("CRD %s converts with %+v", n, conv)
			}
		}
		return nil
	})
}
