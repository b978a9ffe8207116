package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// The CRDs whose conversion webhook the operator keeps pointing at itself.
var DefaultConversionCRDs = []string{etcdv1beta1.EtcdClusterCRD, etcdv1beta1.EtcdBackupCRD}

// ConversionPath is where the webhook server serves conversion reviews (controller-runtime's).
const ConversionPath = "/convert"

// The operator keeps its CRDs' conversion webhook: where the API server calls it and the CA it trusts.
//
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;update,resourceNames=etcdclusters.etcd.etcdkit.dev;etcdbackups.etcd.etcdkit.dev

// conversionKeeper keeps spec.conversion of the CRDs named in crds set to the operator's conversion
// webhook: strategy Webhook, the webhook Service of the operator's namespace at ConversionPath, and
// the caBundle of its ValidatingWebhookConfiguration (which the certificate rotator, or cert-manager
// with the external provisioner, keeps current). The install manifests carry the same setting, but
// Helm installs CRDs it cannot template (the namespace), and a CA rotation changes the caBundle.
// It runs on every replica; they all write the same.
type conversionKeeper struct {
	reader     client.Reader
	writer     client.Writer
	crds       []string
	namespace  string
	service    string
	validating string
	// interval between checks once the conversion was set; retry between failed attempts.
	interval, retry time.Duration
	log             logr.Logger
	// pokes asks for a check before the interval is over (the readiness check does when the caBundle
	// changed).
	pokes chan struct{}

	mu sync.Mutex
	// synced is the caBundle every CRD was last seen set with; nil before.
	synced []byte
	// lastErr is the error of the last check that failed, logged only when it changes.
	lastErr string
}

// newConversionKeeper returns a keeper of crds' conversion webhook: the Service service in
// namespace, trusted with the caBundle of ValidatingWebhookConfiguration validating.
func newConversionKeeper(reader client.Reader, writer client.Writer, crds []string, namespace, service, validating string,
	log logr.Logger) *conversionKeeper {
	return &conversionKeeper{reader: reader, writer: writer, crds: crds, namespace: namespace, service: service,
		validating: validating, interval: time.Minute, retry: 2 * time.Second, log: log, pokes: make(chan struct{}, 1)}
}

// trusts reports whether every CRD was last seen set to this operator's webhook with caBundle.
func (k *conversionKeeper) trusts(caBundle []byte) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.synced != nil && bytes.Equal(k.synced, caBundle)
}

// poke asks for a check now; it never blocks.
func (k *conversionKeeper) poke() {
	select {
	case k.pokes <- struct{}{}:
	default:
	}
}

// Start checks the CRDs at once and every interval (every retry while a check fails) until ctx ends.
func (k *conversionKeeper) Start(ctx context.Context) error {
	for {
		wait := k.interval
		caBundle, err := k.sync(ctx)
		k.mu.Lock()
		first := k.synced == nil && err == nil
		repeated := err != nil && err.Error() == k.lastErr
		if err == nil {
			k.synced, k.lastErr = caBundle, ""
		} else {
			k.lastErr = err.Error()
		}
		k.mu.Unlock()
		switch {
		case err != nil:
			if !repeated {
				k.log.Info("Cannot set the CRDs' conversion webhook yet; retrying", "reason", err.Error(), "retryEvery", k.retry)
			}
			wait = k.retry
		case first:
			k.log.Info("The CRDs' conversion webhook points at this operator", "crds", k.crds, "service", k.namespace+"/"+k.service)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-k.pokes:
		case <-time.After(wait):
		}
	}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every replica serves conversions and
// keeps the setting.
func (*conversionKeeper) NeedLeaderElection() bool { return false }

// sync sets spec.conversion of every CRD of k.crds that differs from the desired one, and returns the
// caBundle they have. It returns an error when the caBundle is not in the ValidatingWebhookConfiguration
// yet, or a read or write fails.
func (k *conversionKeeper) sync(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := k.reader.Get(ctx, client.ObjectKey{Name: k.validating}, v); err != nil {
		return nil, fmt.Errorf("read ValidatingWebhookConfiguration %s for its caBundle: %w", k.validating, err)
	}
	if len(v.Webhooks) == 0 || len(v.Webhooks[0].ClientConfig.CABundle) == 0 {
		return nil, errors.New("ValidatingWebhookConfiguration " + k.validating + " has no caBundle yet")
	}
	caBundle := v.Webhooks[0].ClientConfig.CABundle
	for _, name := range k.crds {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := k.reader.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return nil, fmt.Errorf("read CustomResourceDefinition %s: %w", name, err)
		}
		if k.current(crd.Spec.Conversion, caBundle) {
			continue
		}
		crd.Spec.Conversion = k.desired(caBundle)
		if err := k.writer.Update(ctx, crd); err != nil {
			return nil, fmt.Errorf("set the conversion webhook of CustomResourceDefinition %s: %w", name, err)
		}
		k.log.Info("Set the conversion webhook of a CRD", "crd", name, "service", k.namespace+"/"+k.service)
	}
	return caBundle, nil
}

// desired is the conversion of the CRDs: the operator's webhook, trusted with caBundle.
func (k *conversionKeeper) desired(caBundle []byte) *apiextensionsv1.CustomResourceConversion {
	return &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig: &apiextensionsv1.WebhookClientConfig{
				Service: &apiextensionsv1.ServiceReference{Namespace: k.namespace, Name: k.service,
					Path: ptr.To(ConversionPath), Port: ptr.To[int32](443)},
				CABundle: caBundle,
			},
			ConversionReviewVersions: []string{"v1"},
		},
	}
}

// current reports whether c is the desired conversion.
func (k *conversionKeeper) current(c *apiextensionsv1.CustomResourceConversion, caBundle []byte) bool {
	if c == nil || c.Strategy != apiextensionsv1.WebhookConverter || c.Webhook == nil || c.Webhook.ClientConfig == nil {
		return false
	}
	s := c.Webhook.ClientConfig.Service
	return s != nil && s.Namespace == k.namespace && s.Name == k.service && ptr.Deref(s.Path, "") == ConversionPath &&
		ptr.Deref(s.Port, 443) == 443 && c.Webhook.ClientConfig.URL == nil &&
		bytes.Equal(c.Webhook.ClientConfig.CABundle, caBundle) && len(c.Webhook.ConversionReviewVersions) > 0
}
