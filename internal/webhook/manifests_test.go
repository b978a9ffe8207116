package webhook

import (
	"bufio"
	"errors"
	"io"
	"os"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/etcdkit/etcd-operator/internal/testenv"
	webhookv1beta1 "github.com/etcdkit/etcd-operator/internal/webhook/v1beta1"
)

// installed is what dist/install.yaml installs, by kind and name.
type installed map[string][]byte

// readInstall returns the objects of dist/install.yaml, keyed "Kind/name".
func readInstall(t *testing.T) installed {
	t.Helper()
	f, err := os.Open(testenv.InstallFile())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() //nolint:errcheck // read only
	objs := installed{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("read %s: %v", testenv.InstallFile(), err)
		}
		var meta metav1.PartialObjectMetadata
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		if meta.Kind != "" {
			objs[meta.Kind+"/"+meta.Name] = doc
		}
	}
}

// get decodes the object kind/name into into, and fails t when it is not installed.
func (objs installed) get(t *testing.T, kindName string, into any) {
	t.Helper()
	doc, ok := objs[kindName]
	if !ok {
		t.Fatalf("dist/install.yaml has no %s", kindName)
	}
	if err := yaml.Unmarshal(doc, into); err != nil {
		t.Fatalf("decode %s: %v", kindName, err)
	}
}

// TestInstallMatchesDefaults: what dist/install.yaml installs is what the operator's webhook flags
// default to, so that the generated certificate, the Service, the Secret and the webhook
// configurations find each other.
func TestInstallMatchesDefaults(t *testing.T) {
	objs := readInstall(t)

	var d appsv1.Deployment
	objs.get(t, "Deployment/etcd-operator", &d)
	ns := d.Namespace
	c := d.Spec.Template.Spec.Containers[0]
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "webhook" && p.ContainerPort == DefaultPort }) {
		t.Errorf("the operator container has no port webhook=%d: %v", DefaultPort, c.Ports)
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace"
	}) {
		t.Errorf("the operator container does not get POD_NAMESPACE from the downward API: %v", c.Env)
	}
	i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == DefaultCertDir })
	if i < 0 {
		t.Fatalf("nothing is mounted at %s: %v", DefaultCertDir, c.VolumeMounts)
	}
	if !slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Name == c.VolumeMounts[i].Name && v.EmptyDir != nil
	}) {
		t.Errorf("the certificate directory is not a writable emptyDir: %v", d.Spec.Template.Spec.Volumes)
	}

	var svc corev1.Service
	objs.get(t, "Service/"+DefaultServiceName, &svc)
	if svc.Namespace != ns || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.StrVal != "webhook" {
		t.Errorf("Service %s/%s: want port 443 to the operator's webhook port: %+v", svc.Namespace, svc.Name, svc.Spec)
	}
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("Service %s selects %s=%s, which the operator's pods do not have", svc.Name, k, v)
		}
	}
	var secret corev1.Secret
	objs.get(t, "Secret/"+DefaultSecretName, &secret)
	if secret.Namespace != ns || len(secret.Data) != 0 {
		t.Errorf("Secret %s/%s: want it empty, in %s", secret.Namespace, secret.Name, ns)
	}

	checkHook := func(kind, name string, cc admissionregistrationv1.WebhookClientConfig, fp *admissionregistrationv1.FailurePolicyType, mc []admissionregistrationv1.MatchCondition, path string) {
		t.Helper()
		if s := cc.Service; s == nil || s.Name != DefaultServiceName || s.Namespace != ns || s.Path == nil || *s.Path != path {
			t.Errorf("%s %s calls %+v, want Service %s/%s at %s", kind, name, cc.Service, ns, DefaultServiceName, path)
		}
		if fp == nil || *fp != admissionregistrationv1.Fail {
			t.Errorf("%s %s: failurePolicy %v, want Fail", kind, name, fp)
		}
		if len(mc) != 1 {
			t.Errorf("%s %s: matchConditions %v, want the one that skips metadata-only updates", kind, name, mc)
		}
	}
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	objs.get(t, "ValidatingWebhookConfiguration/"+DefaultValidatingConfiguration, &v)
	for _, h := range v.Webhooks {
		checkHook("ValidatingWebhookConfiguration", v.Name, h.ClientConfig, h.FailurePolicy, h.MatchConditions, webhookv1beta1.ValidatePath)
	}
	var m admissionregistrationv1.MutatingWebhookConfiguration
	objs.get(t, "MutatingWebhookConfiguration/"+DefaultMutatingConfiguration, &m)
	for _, h := range m.Webhooks {
		checkHook("MutatingWebhookConfiguration", m.Name, h.ClientConfig, h.FailurePolicy, h.MatchConditions, webhookv1beta1.MutatePath)
	}
	if len(v.Webhooks) != 1 || len(m.Webhooks) != 1 {
		t.Errorf("%d validating and %d mutating webhooks, want 1 each", len(v.Webhooks), len(m.Webhooks))
	}

	// RBAC: the operator may write exactly these objects.
	var role rbacv1.Role
	objs.get(t, "Role/etcd-operator-webhook-cert", &role)
	if role.Namespace != ns || !grants(role.Rules, "secrets", "update", DefaultSecretName) || grants(role.Rules, "secrets", "update", "another") {
		t.Errorf("Role %s/%s does not let the operator update Secret %s, and only it: %+v", role.Namespace, role.Name, DefaultSecretName, role.Rules)
	}
	var cr rbacv1.ClusterRole
	objs.get(t, "ClusterRole/etcd-operator", &cr)
	for res, name := range map[string]string{
		"validatingwebhookconfigurations": DefaultValidatingConfiguration,
		"mutatingwebhookconfigurations":   DefaultMutatingConfiguration,
	} {
		if !grants(cr.Rules, res, "update", name) || grants(cr.Rules, res, "update", "another") {
			t.Errorf("ClusterRole %s does not let the operator update %s %s, and only it", cr.Name, res, name)
		}
		if !grants(cr.Rules, res, "watch", "") {
			t.Errorf("ClusterRole %s does not let the operator watch %s", cr.Name, res)
		}
	}
}

// grants reports whether rules allow verb on resource (of any group) named name ("" for any name).
func grants(rules []rbacv1.PolicyRule, resource, verb, name string) bool {
	for _, r := range rules {
		if slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) &&
			(len(r.ResourceNames) == 0 || name != "" && slices.Contains(r.ResourceNames, name)) {
			return true
		}
	}
	return false
}
