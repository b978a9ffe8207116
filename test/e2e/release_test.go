//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

const (
	// releaseNamespace is where TestReleaseFromRegistry installs the released operator ("e2e-": a run
	// that dies leaves it to the next run's removeLeftovers).
	releaseNamespace = "e2e-release-operator"
	// releaseAppNamespace holds the test's registry and its EtcdCluster.
	releaseAppNamespace = "e2e-release"
	// releaseImageName is the operator image's name in the test's registry.
	releaseImageName = "etcd-operator"
	// makeTimeout bounds `make release` (a build of the binary, the image, the install files and the
	// chart) and `make push`.
	makeTimeout = 5 * time.Minute
	// registryTimeout bounds the registry pod's start until it answers.
	registryTimeout = 60 * time.Second
)

// digestRef matches the line `make push` prints for what it pushed: REGISTRY/NAME@sha256:<hex>.
var digestRef = regexp.MustCompile(`(?m)^(\S+@sha256:[0-9a-f]{64})$`)

// TestReleaseFromRegistry: the operator goes from this tree to a cluster through a registry, as it
// does outside the local cluster. An OCI registry runs in the cluster (hack/registry, a hostNetwork pod
// on 127.0.0.1, where the node's container runtime pulls over plain HTTP); `make release` builds a
// release for it, of a version no node has (v0.0.0-e2e.<seconds>), whose install.yaml puts the
// operator in a namespace of its own; `make push` pushes the release's image (the same digest as the
// release's tarball, labelled with the version). The operator installed from that install.yaml, in
// place of the suite's (set aside meanwhile, as TestHelmInstall does), runs the image the kubelet
// pulled from the registry (its pods' imageID is the pushed digest, the kubelet reports the pull,
// the registry served the image's config), logs its version at start, admits EtcdClusters and makes
// a 1-member cluster Available. The released operator is uninstalled afterwards and the suite's
// restored.
func TestReleaseFromRegistry(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	regImage := os.Getenv("E2E_REGISTRY_IMAGE")
	if regImage == "" {
		t.Fatal("E2E_REGISTRY_IMAGE is not set: name the image of hack/registry that the cluster can run (make test-e2e packs and sets it for the local cluster: hack/build-registry.sh)")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	registry := startRegistry(t, regImage)
	version := fmt.Sprintf("v0.0.0-e2e.%d", time.Now().Unix())
	repo := registry + "/" + releaseImageName
	ref := repo + ":" + version

	dir := t.TempDir()
	runMake(t, root, "release", "VERSION="+version, "IMG="+repo, "RELEASE_NAMESPACE="+releaseNamespace, "RELEASE_DIR="+dir)
	// built beside the release, not over the developer's bin/etcd-operator and bin/etcd-operator.tar
	out := runMake(t, root, "push", "VERSION="+version, "IMG="+ref,
		"OPERATOR_BIN="+filepath.Join(dir, "push", "etcd-operator"), "IMAGE_TAR="+filepath.Join(dir, "push", "etcd-operator.tar"))
	m := digestRef.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("make push printed no REGISTRY/NAME@sha256:... line:\n%s", out)
	}
	pushed := m[1]
	imageID := assertPushedRelease(t, filepath.Join(dir, "etcd-operator.tar"), ref, pushed, version)

	setAsideInstalledOperator(t)
	installFile(t, filepath.Join(dir, "install.yaml"))
	took, err := waitAdmissionIn(releaseNamespace, admissionTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("install.yaml of the release applied -> EtcdClusters admitted in %s", took.Round(100*time.Millisecond))
	assertPulledFromRegistry(t, ref, pushed, imageID)
	assertLogsVersion(t, version)

	c := newCluster(t, releaseAppNamespace, "demo", 1, testutil.WithEmptyDir(), testutil.WithImage(suiteEtcdImage(t)))
	took, _ = assertAvailable(t, c, availableTimeout)
	leader, err := operatorLeader(ctx, releaseNamespace)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("1-member cluster Available in %s under the released operator (leader %s)", took.Round(100*time.Millisecond), leader)
	// the cluster goes while the released operator runs (it removes its finalizer)
	if err := k8s.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	awaitClusterGone(t, c)
	t.Logf("release %s: built, pushed, pulled, installed and ran a cluster in %s", version, time.Since(start).Round(time.Second))
}

// startRegistry runs the in-memory registry of image as a hostNetwork pod listening on 127.0.0.1 of
// the node (the machine the tests run on), and returns its host:port once it answers.
func startRegistry(t *testing.T, image string) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseAppNamespace}}
	if err := k8s.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			_ = k8s.Delete(context.Background(), ns)
		}
	})
	host := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "registry", Namespace: releaseAppNamespace},
		Spec: corev1.PodSpec{
			// the node's container runtime pulls from the host's loopback, over plain HTTP
			HostNetwork: true,
			Containers: []corev1.Container{{
				Name: "registry", Image: image, ImagePullPolicy: corev1.PullNever,
				Args: []string{"-addr", host},
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatalf("create the registry pod: %v", err)
	}
	took := poll.Eventually(t, registryTimeout, "the registry at "+host+" answers", func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/v2/", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /v2/: %s", resp.Status)
		}
		return nil
	})
	t.Logf("registry %s (image %s) answers %s after its pod was created", host, image, took.Round(100*time.Millisecond))
	return host
}

// runMake runs make with args in the repository root and returns its output (stdout and stderr),
// failing the test when make fails or outlasts makeTimeout.
func runMake(t *testing.T, root string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), makeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", args...)
	cmd.Dir = root
	// a make that runs the tests (make test-e2e) must not pass its own variables on
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=") || strings.HasPrefix(kv, "MFLAGS=")
	})
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("make %s (%s):\n%s", strings.Join(args, " "), time.Since(start).Round(100*time.Millisecond), out.String())
	if err != nil {
		t.Fatalf("make %s: %v", args[0], err)
	}
	return out.String()
}

// assertPushedRelease checks that the registry serves under ref the image of the release's tarball,
// as pushed by digest, labelled with version, and returns the image's ID (its config's digest).
func assertPushedRelease(t *testing.T, tarPath, ref, pushed, version string) string {
	t.Helper()
	img, err := tarball.ImageFromPath(tarPath, nil)
	if err != nil {
		t.Fatalf("the release's image: %v", err)
	}
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	id, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		t.Fatal(err)
	}
	if want := tag.Context().Digest(digest.String()).String(); pushed != want {
		t.Errorf("make push pushed %s, want the release's image %s", pushed, want)
	}
	served, err := remote.Image(tag)
	if err != nil {
		t.Fatalf("the registry does not serve %s: %v", ref, err)
	}
	servedDigest, err := served.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if servedDigest != digest {
		t.Errorf("the registry serves %s as %s, want %s", ref, servedDigest, digest)
	}
	cf, err := served.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Config.Labels["org.opencontainers.image.version"]; got != version {
		t.Errorf("the pushed image's label org.opencontainers.image.version is %q, want %q", got, version)
	}
	t.Logf("pushed %s: the release's image (ID %s), labelled version %s", pushed, id, version)
	return id.String()
}

// readObjects returns the objects of a multi-document YAML file, in order.
func readObjects(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// installFile applies the objects of an install file server-side, as `kubectl apply --server-side -f`
// does, and when the test ends deletes them again (the CRDs excepted, which the suite's operator
// shares): the Deployment first, waiting until its pods are gone, then the cluster-scoped objects
// and the namespace.
func installFile(t *testing.T, path string) {
	t.Helper()
	objs, err := readObjects(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { uninstallFile(t, objs) })
	for _, o := range objs {
		if err := k8s.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("e2e-release"), client.ForceOwnership); err != nil {
			t.Fatalf("apply %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	t.Logf("applied the %d objects of %s", len(objs), path)
}

// uninstallFile deletes what installFile applied from objs, but the CRDs.
func uninstallFile(t *testing.T, objs []*unstructured.Unstructured) {
	ctx := context.Background()
	if t.Failed() {
		logReleasedOperator(t)
	}
	var deps []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			deps = append(deps, o)
		}
	}
	for _, o := range deps {
		if err := k8s.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	poll.Eventually(t, deleteTimeout, "the released operator's pods gone", func(ctx context.Context) error {
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(releaseNamespace), operatorSelector); err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d pods left", len(pods.Items))
		}
		return nil
	})
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" || o.GetNamespace() != "" {
			continue // the CRDs stay; namespaced objects go with their namespace
		}
		if err := k8s.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// logReleasedOperator logs the last lines of the released operator's pods, for a failed test.
func logReleasedOperator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(releaseNamespace), operatorSelector); err != nil {
		t.Logf("the released operator's pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		raw, err := kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: ptr.To[int64](40)}).DoRaw(ctx)
		t.Logf("released operator pod %s (%v), its last lines:\n%s", p.Name, err, raw)
	}
}

// assertPulledFromRegistry checks that every pod of the released operator runs the image ref as the
// kubelet pulled it from the test's registry: its imageID is the pushed digest, the kubelet reports
// pulling it (not finding it present), and the registry served the image's config (imageID) to the
// node.
func assertPulledFromRegistry(t *testing.T, ref, pushed, imageID string) {
	t.Helper()
	ctx := context.Background()
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(releaseNamespace), operatorSelector); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatal("no pod of the released operator")
	}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Image != ref || cs.ImageID != pushed {
				t.Errorf("operator pod %s container %s runs image %q (ID %q), want %q pulled as %q", p.Name, cs.Name, cs.Image, cs.ImageID, ref, pushed)
			}
		}
	}
	events := &corev1.EventList{}
	if err := k8s.List(ctx, events, client.InNamespace(releaseNamespace)); err != nil {
		t.Fatal(err)
	}
	var pulled []string
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "Pod" && e.Reason == "Pulled" && strings.Contains(e.Message, ref) {
			pulled = append(pulled, e.InvolvedObject.Name+": "+e.Message)
		}
	}
	if !slices.ContainsFunc(pulled, func(m string) bool { return strings.Contains(m, "Successfully pulled") }) {
		t.Errorf("no kubelet event of pulling %s; the Pulled events:\n%s", ref, strings.Join(pulled, "\n"))
	}
	raw, err := kube.CoreV1().Pods(releaseAppNamespace).GetLogs("registry", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("the registry's log: %v", err)
	}
	if want := "GET /v2/" + releaseImageName + "/blobs/" + imageID; !strings.Contains(string(raw), want) {
		t.Errorf("the registry's log has no %q (the node's pull of the image's config):\n%s", want, raw)
	}
	t.Logf("the kubelet pulled %s from the registry:\n%s", pushed, strings.Join(pulled, "\n"))
}

// assertLogsVersion checks that each pod of the released operator logged its version at start.
func assertLogsVersion(t *testing.T, version string) {
	t.Helper()
	ctx := context.Background()
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(releaseNamespace), operatorSelector); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		raw, err := kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			t.Fatalf("log of %s: %v", p.Name, err)
		}
		found := false
		for l := range strings.Lines(string(raw)) {
			found = found || (strings.Contains(l, "Starting the manager") && strings.Contains(l, `"version":"`+version+`"`))
		}
		if !found {
			t.Errorf("operator pod %s did not log its version %s at start:\n%s", p.Name, version, raw)
		}
	}
}

// suiteEtcdImage returns the etcd image an EtcdCluster needs under an operator without the suite's
// --etcd-image-repository (the release's runs the official repository's images, which the local
// cluster cannot pull): that repository's image of the default version, or "" when the suite's
// operator uses the official repository too.
func suiteEtcdImage(t *testing.T) string {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: operatorNamespace, Name: "etcd-operator"}, d); err != nil {
		t.Fatal(err)
	}
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		if repo, ok := strings.CutPrefix(a, "--etcd-image-repository="); ok {
			return repo + ":v" + etcdv1beta1.DefaultVersion
		}
	}
	return ""
}
