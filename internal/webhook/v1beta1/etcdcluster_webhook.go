// Package v1beta1 is the admission webhook of EtcdCluster v1beta1 (requests made in v1alpha1 reach it
// converted, the webhook configurations' matchPolicy being Equivalent), and the conversion webhook of
// EtcdCluster and EtcdBackup. Admission is defaulting (Default) and the
// validation that the CRD's schema and CEL rules cannot express, or should state in the same words
// whichever way an object gets in (ValidateCreate, ValidateUpdate). The rules are pure functions of the
// old and new objects; the webhook only wraps them.
package v1beta1

import (
	"context"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// The paths the webhook server serves the EtcdCluster webhooks at, and the markers below name. They
// are those controller-runtime derived for v1alpha1, kept for v1beta1: while the operator's Deployment
// rolls from a release of v1alpha1 to this one, the API server sends admission requests to pods of
// either, and both serve these paths.
const (
	MutatePath   = "/mutate-etcd-etcdkit-dev-v1alpha1-etcdcluster"
	ValidatePath = "/validate-etcd-etcdkit-dev-v1alpha1-etcdcluster"
)

// SetupEtcdClusterWebhookWithManager registers the defaulting (with defaults d) and the validating
// webhook of EtcdCluster on mgr's webhook server, at MutatePath and ValidatePath, and the conversion
// webhook of EtcdCluster and EtcdBackup at /convert (mgr's scheme must hold v1alpha1 and v1beta1).
// Calling it adds the webhook server to mgr (which starts it at once if mgr runs), so the serving
// certificate must be in place first. It returns the error of the webhook builder, if any.
//
// The defaulting webhook is controller-runtime's (admission.WithDefaulter) behind newDefaultingHandler,
// registered here rather than by the builder, which offers no way to wrap the handler it builds.
func SetupEtcdClusterWebhookWithManager(mgr ctrl.Manager, d Defaults, memberPod func(*etcdv1beta1.EtcdCluster) *corev1.Pod) error {
	mutating := admission.WithDefaulter(mgr.GetScheme(), &EtcdClusterDefaulter{Defaults: d})
	mutating.Handler = newDefaultingHandler(mgr.GetScheme(), mutating.Handler)
	mgr.GetWebhookServer().Register(MutatePath, mutating)
	// The builders also serve the conversion webhook (/convert) for both kinds: v1beta1 is their hub,
	// v1alpha1 converts to and from it.
	if err := ctrl.NewWebhookManagedBy(mgr, &etcdv1beta1.EtcdCluster{}).
		WithValidator(validator(mgr, memberPod)).
		WithValidatorCustomPath(ValidatePath).
		Complete(); err != nil {
		return err
	}
	return ctrl.NewWebhookManagedBy(mgr, &etcdv1beta1.EtcdBackup{}).Complete()
}

// validator returns the validator of SetupEtcdClusterWebhookWithManager: it checks the members' pods
// (MemberPods) when memberPod is not nil.
func validator(mgr ctrl.Manager, memberPod func(*etcdv1beta1.EtcdCluster) *corev1.Pod) *EtcdClusterValidator {
	v := &EtcdClusterValidator{Reader: mgr.GetAPIReader()}
	if memberPod != nil {
		v.Pods = &MemberPods{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Build: memberPod}
	}
	return v
}

// newDefaultingHandler returns an admission.Handler that answers a create or update whose object does
// not decode into an EtcdCluster (a field of the wrong JSON type, such as spec.replicas: "three" or
// spec.options.extraArgs given as a list) with "allowed" and no patch, and hands every other request to
// next, the defaulting handler, unchanged. next would refuse such an object with Go's decoding error
// ("json: cannot unmarshal string into Go struct field ..."); let through, it reaches the CRD's schema
// validation, which runs after the mutating webhooks and refuses it with the field path and the type
// the schema wants ("spec.replicas in body must be of type integer"). Nothing undefaulted gets stored
// this way: what the schema accepts but still does not decode, the validating webhook refuses.
func newDefaultingHandler(scheme *runtime.Scheme, next admission.Handler) admission.Handler {
	return &defaultingHandler{decoder: admission.NewDecoder(scheme), next: next}
}

// defaultingHandler is the handler of newDefaultingHandler.
type defaultingHandler struct {
	decoder admission.Decoder
	next    admission.Handler
}

// Handle implements admission.Handler.
func (h *defaultingHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Delete { // next allows deletes without decoding anything
		if err := h.decoder.Decode(req, &etcdv1beta1.EtcdCluster{}); err != nil {
			return admission.Allowed("not defaulted: the object does not decode (" + err.Error() + "); left to the CRD's schema validation")
		}
	}
	return h.next.Handle(ctx, req)
}

// Both webhooks fail closed (failurePolicy Fail): while the operator is not serving, EtcdClusters can
// be neither created nor changed, because only the webhook knows the upgrade path from what the
// members run. Metadata-only updates (finalizers, labels) skip both webhooks through the
// matchConditions that config/webhook adds, so a cluster can always be deleted.
//
// +kubebuilder:webhook:path=/mutate-etcd-etcdkit-dev-v1alpha1-etcdcluster,mutating=true,failurePolicy=fail,sideEffects=None,groups=etcd.etcdkit.dev,resources=etcdclusters,verbs=create;update,versions=v1beta1,name=metcdcluster-v1alpha1.etcd.etcdkit.dev,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-etcd-etcdkit-dev-v1alpha1-etcdcluster,mutating=false,failurePolicy=fail,sideEffects=None,groups=etcd.etcdkit.dev,resources=etcdclusters,verbs=create;update,versions=v1beta1,name=vetcdcluster-v1alpha1.etcd.etcdkit.dev,admissionReviewVersions=v1,timeoutSeconds=10

// Defaults are the defaults of a new EtcdCluster that the operator's installer chooses.
type Defaults struct {
	// NetworkPolicy gives a new cluster that does not mention spec.networkPolicy one
	// (spec.networkPolicy.enabled: true): for Kubernetes clusters whose network plugin enforces
	// NetworkPolicies, which the operator cannot find out by itself.
	NetworkPolicy bool
}

// EtcdClusterDefaulter sets the defaults the CRD's schema cannot: see Default.
type EtcdClusterDefaulter struct {
	Defaults Defaults
}

var _ admission.Defaulter[*etcdv1beta1.EtcdCluster] = &EtcdClusterDefaulter{}

// Default implements admission.Defaulter by calling Default, and, when the cluster is being created,
// DefaultOnCreate and the installer's Defaults. It never fails.
func (d *EtcdClusterDefaulter) Default(ctx context.Context, c *etcdv1beta1.EtcdCluster) error {
	Default(c)
	if req, err := admission.RequestFromContext(ctx); err == nil && req.Operation == admissionv1.Create {
		DefaultOnCreate(c)
		if d.Defaults.NetworkPolicy && c.Spec.NetworkPolicy == nil {
			c.Spec.NetworkPolicy = &etcdv1beta1.NetworkPolicySpec{Enabled: true}
		}
	}
	return nil
}

// DefaultAutoCompactionRetention is the history a new cluster keeps by default (periodic
// auto-compaction, DefaultOnCreate): etcd compacts revisions older than this, so that its database
// does not grow with every change ever made until it reaches the quota.
const DefaultAutoCompactionRetention = "1h"

// DefaultOnCreate sets what only a new cluster gets by default: TLS on the client and on the peer port,
// each unless spec.tls says otherwise, and periodic auto-compaction keeping
// DefaultAutoCompactionRetention of history unless spec.options sets either compaction field (etcd's
// own default is never to compact). A cluster that exists keeps what it was created with (a cluster
// created before spec.tls existed has none, and serves plain text; one created before the compaction
// default keeps none, and its members are not restarted for it).
func DefaultOnCreate(c *etcdv1beta1.EtcdCluster) {
	if c.Spec.Options == nil {
		c.Spec.Options = &etcdv1beta1.EtcdOptions{}
	}
	if o := c.Spec.Options; o.AutoCompactionMode == "" && o.AutoCompactionRetention == "" {
		o.AutoCompactionMode, o.AutoCompactionRetention = etcdv1beta1.AutoCompactionPeriodic, DefaultAutoCompactionRetention
	}
	if c.Spec.TLS == nil {
		c.Spec.TLS = &etcdv1beta1.TLSSpec{}
	}
	if c.Spec.TLS.Client == nil {
		c.Spec.TLS.Client = &etcdv1beta1.TLSListenerSpec{Enabled: true}
	}
	if c.Spec.TLS.Peer == nil {
		c.Spec.TLS.Peer = &etcdv1beta1.TLSListenerSpec{Enabled: true}
	}
}

// Default strips a leading "v" from spec.version ("v3.6.16" becomes "3.6.16"), as image tags and
// `etcd --version` write it. Everything else keeps the schema's defaults.
func Default(c *etcdv1beta1.EtcdCluster) {
	v := c.Spec.Version
	if len(v) > 1 && v[0] == 'v' && v[1] >= '0' && v[1] <= '9' {
		c.Spec.Version = strings.TrimPrefix(v, "v")
	}
}

// EtcdClusterValidator refuses what ValidateCreate and ValidateUpdate find wrong, with a 422 Invalid
// status that lists every problem with its field path, and returns their warnings otherwise.
type EtcdClusterValidator struct {
	// Reader reads the EtcdBackup a new cluster restores (ValidateRestore); nil skips that check.
	Reader client.Reader
	// Pods checks the members' pods of a new cluster, and of a change that restarts the members
	// (rolledFields), once nothing else is wrong; nil skips that check.
	Pods *MemberPods
}

var _ admission.Validator[*etcdv1beta1.EtcdCluster] = &EtcdClusterValidator{}

// ValidateCreate implements admission.Validator.
func (v *EtcdClusterValidator) ValidateCreate(ctx context.Context, c *etcdv1beta1.EtcdCluster) (admission.Warnings, error) {
	errs, warnings := ValidateCreate(c)
	b, err := lookupBackup(ctx, v.Reader, c)
	if err != nil {
		return warnings, apierrors.NewInternalError(err)
	}
	rerrs, rwarn := ValidateRestore(c, b)
	errs, warnings = append(errs, rerrs...), append(warnings, rwarn...)
	if len(errs) == 0 && v.Pods != nil {
		perrs, pwarn := v.Pods.validate(ctx, c, true)
		errs, warnings = append(errs, perrs...), append(warnings, pwarn...)
	}
	if len(errs) > 0 {
		warnings = nil // warnings of a refused request only distract
	}
	return warnings, invalid(c, errs)
}

// ValidateUpdate implements admission.Validator.
func (v *EtcdClusterValidator) ValidateUpdate(ctx context.Context, old, c *etcdv1beta1.EtcdCluster) (admission.Warnings, error) {
	errs, warnings := ValidateUpdate(old, c)
	// rolledFields again, only when the dry run may be due: ValidateUpdate keeps it to itself
	if len(errs) == 0 && v.Pods != nil && rolls(&old.Spec, &c.Spec) {
		perrs, pwarn := v.Pods.validate(ctx, c, false)
		if len(perrs) > 0 {
			warnings = nil // warnings of a refused request only distract
		}
		errs, warnings = append(errs, perrs...), append(warnings, pwarn...)
	}
	return warnings, invalid(c, errs)
}

// ValidateDelete implements admission.Validator; deletion is always allowed (the webhook is not
// called for it).
func (*EtcdClusterValidator) ValidateDelete(context.Context, *etcdv1beta1.EtcdCluster) (admission.Warnings, error) {
	return nil, nil
}

// invalid returns a 422 Invalid error for c listing errs, or nil when errs is empty.
func invalid(c *etcdv1beta1.EtcdCluster, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(etcdv1beta1.GroupVersion.WithKind("EtcdCluster").GroupKind(), c.Name, errs)
}

// rolls reports whether the change from o to s restarts the members (rolledFields names a field).
func rolls(o, s *etcdv1beta1.EtcdClusterSpec) bool {
	rolled, _ := rolledFields(o, s)
	return len(rolled) > 0
}
