// Package webhook runs the operator's admission webhooks: their HTTPS server, its serving certificate
// (generated and rotated by the operator itself, or provided from outside, for example by
// cert-manager), and their registration once that certificate is in place.
package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	webhookv1beta1 "github.com/etcdkit/etcd-operator/internal/webhook/v1beta1"
)

// Provisioner says where the webhook server's certificate comes from.
type Provisioner string

const (
	// ProvisionerSelf: the operator generates a CA and a serving certificate into a Secret of its own
	// namespace, writes the certificate into the certificate directory, puts the CA into the caBundle of
	// its webhook configurations, and renews them before they expire.
	ProvisionerSelf Provisioner = "self"
	// ProvisionerExternal: tls.crt and tls.key are mounted into the certificate directory by someone
	// else (cert-manager, for one), who also keeps the caBundle of the webhook configurations current.
	ProvisionerExternal Provisioner = "external"
)

// The names of what config/webhook installs (after its namePrefix), and the defaults of Options.
const (
	DefaultServiceName             = "etcd-operator-webhook-service"
	DefaultSecretName              = "etcd-operator-webhook-server-cert"
	DefaultValidatingConfiguration = "etcd-operator-validating-webhook-configuration"
	DefaultMutatingConfiguration   = "etcd-operator-mutating-webhook-configuration"
	DefaultPort                    = 9443
)

// DefaultCertDir is where the webhook server reads tls.crt and tls.key; the Deployment mounts a volume
// there.
var DefaultCertDir = filepath.Join("/tmp", "k8s-webhook-server", "serving-certs")

// The certificates the self provisioner generates: a CA valid for 10 years and a serving certificate
// valid for 1 year, each renewed 90 days before it expires (checked every 12 hours).
const (
	caName         = "etcd-operator-webhook-ca"
	caOrganization = "etcd-operator"
	caValidity     = 10 * 365 * 24 * time.Hour
	certValidity   = 365 * 24 * time.Hour
	renewBefore    = 90 * 24 * time.Hour
	renewalCheck   = 12 * time.Hour
	rotatorName    = "webhook-cert-rotator"
	fieldOwner     = "etcd-operator"
)

// The operator needs its webhook configurations to put the CA into them.
//
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=get;list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=update,resourceNames=etcd-operator-validating-webhook-configuration
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,verbs=update,resourceNames=etcd-operator-mutating-webhook-configuration

// Options configure the webhook server and its certificate.
type Options struct {
	// Host the server listens on; empty for every interface.
	Host string
	// Port of the HTTPS server (DefaultPort when 0).
	Port int
	// CertDir holds tls.crt and tls.key (DefaultCertDir when empty). With ProvisionerSelf the operator
	// writes them; the directory is created if missing.
	CertDir string
	// Provisioner is ProvisionerSelf (when empty) or ProvisionerExternal.
	Provisioner Provisioner
	// Namespace of the operator, where the Secret is (required with ProvisionerSelf).
	Namespace string
	// SecretName is the Secret that holds the generated CA and certificate (ca.crt, ca.key, tls.crt,
	// tls.key). It must exist, possibly empty: the operator fills it but does not create it.
	SecretName string
	// ServiceName is the Service in front of the server: the generated certificate is for
	// <ServiceName>.<Namespace>.svc and <ServiceName>.<Namespace>.svc.<ClusterDomain>.
	ServiceName string
	// ClusterDomain is the cluster's DNS domain (cluster.local when empty).
	ClusterDomain string
	// ValidatingConfiguration and MutatingConfiguration name the webhook configurations whose caBundle
	// the operator sets.
	ValidatingConfiguration string
	MutatingConfiguration   string
	// RotatorName names the certificate rotator's controller ("webhook-cert-rotator" when empty);
	// controller names are unique per process, so a second manager in one process (a test) needs
	// another.
	RotatorName string
	// Defaults are what the defaulting webhook gives a new EtcdCluster besides TLS.
	Defaults webhookv1beta1.Defaults
	// MemberPod builds the pod a cluster's spec makes for a member (resources.Options.AdmissionPod),
	// which the validating webhook creates as a dry run (webhookv1beta1.MemberPods); nil: no such check.
	MemberPod func(*etcdv1beta1.EtcdCluster) *corev1.Pod
	// ConversionCRDs are the CRDs whose conversion webhook the operator keeps pointing at its Service
	// in Namespace, trusted with the caBundle of ValidatingConfiguration (DefaultConversionCRDs when
	// nil; none when empty but not nil, or when Namespace is unknown).
	ConversionCRDs []string
}

// withDefaults returns o with every empty field set to its default, or an error when o cannot work.
func (o Options) withDefaults() (Options, error) {
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	if o.CertDir == "" {
		o.CertDir = DefaultCertDir
	}
	if o.Provisioner == "" {
		o.Provisioner = ProvisionerSelf
	}
	if o.SecretName == "" {
		o.SecretName = DefaultSecretName
	}
	if o.ServiceName == "" {
		o.ServiceName = DefaultServiceName
	}
	if o.ClusterDomain == "" {
		o.ClusterDomain = "cluster.local"
	}
	if o.RotatorName == "" {
		o.RotatorName = rotatorName
	}
	if o.ValidatingConfiguration == "" {
		o.ValidatingConfiguration = DefaultValidatingConfiguration
	}
	if o.MutatingConfiguration == "" {
		o.MutatingConfiguration = DefaultMutatingConfiguration
	}
	if o.ConversionCRDs == nil {
		o.ConversionCRDs = DefaultConversionCRDs
	}
	switch o.Provisioner {
	case ProvisionerSelf:
		if o.Namespace == "" {
			return o, errors.New("the webhook certificate provisioner \"self\" needs the operator's namespace: set POD_NAMESPACE (the Deployment sets it from the downward API)")
		}
	case ProvisionerExternal:
	default:
		return o, fmt.Errorf("unknown webhook certificate provisioner %q: use \"self\" or \"external\"", o.Provisioner)
	}
	return o, nil
}

// NewServer returns the webhook server for o, to pass as ctrl.Options.WebhookServer. It reads its
// certificate from o.CertDir when it starts, and again whenever the files change; it speaks HTTP/1.1
// and drains for DrainPeriod before it stops.
func NewServer(o Options) (crwebhook.Server, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	return newDrainingServer(crwebhook.Options{Host: o.Host, Port: o.Port, CertDir: o.CertDir}, DrainPeriod), nil
}

// Setup arranges for mgr, built with NewServer(o), to serve the EtcdCluster webhooks and the
// conversion webhook of both kinds, and to keep the CRDs' conversion set to them: at once with
// ProvisionerExternal; with ProvisionerSelf once the certificate is generated (or found valid in the
// Secret), written to o.CertDir and its CA put into both webhook configurations. It returns the
// readiness check to add to mgr. The check fails until the API server could call the webhooks: they
// are registered, their server accepts TLS connections, and the certificate it presents verifies,
// for <ServiceName>.<Namespace>.svc, against the caBundle of every webhook of both configurations,
// and the CRDs' conversion webhook is this Service with that caBundle (when Namespace is known).
// So the operator's pod only receives admission requests it can answer, and is taken out of the
// Service again when a rotation or an outside change breaks that trust.
func Setup(mgr ctrl.Manager, o Options) (healthz.Checker, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &registration{mgr: mgr, defaults: o.Defaults, memberPod: o.MemberPod, done: make(chan struct{}), trust: newTrustCheck(mgr.GetAPIReader(), o),
		log: mgr.GetLogger().WithName("webhook"), last: "unknown"}
	if crds := o.ConversionCRDs; len(crds) > 0 && o.Namespace != "" {
		r.conversion = newConversionKeeper(mgr.GetAPIReader(), mgr.GetClient(), crds, o.Namespace, o.ServiceName,
			o.ValidatingConfiguration, mgr.GetLogger().WithName("webhook"))
		if err := mgr.Add(r.conversion); err != nil {
			return nil, fmt.Errorf("add the keeper of the CRDs' conversion webhook: %w", err)
		}
	}
	if o.Provisioner == ProvisionerExternal {
		if err := r.register(); err != nil {
			return nil, err
		}
		return r.check, nil
	}

	secret := types.NamespacedName{Namespace: o.Namespace, Name: o.SecretName}
	certsReady := make(chan struct{})
	if err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:              secret,
		CertDir:                o.CertDir,
		CAName:                 caName,
		CAOrganization:         caOrganization,
		DNSName:                fmt.Sprintf("%s.%s.svc", o.ServiceName, o.Namespace),
		ExtraDNSNames:          []string{fmt.Sprintf("%s.%s.svc.%s", o.ServiceName, o.Namespace, o.ClusterDomain)},
		IsReady:                certsReady,
		CaCertDuration:         caValidity,
		ServerCertDuration:     certValidity,
		LookaheadInterval:      renewBefore,
		RotationCheckFrequency: renewalCheck,
		Webhooks: []rotator.WebhookInfo{
			{Name: o.ValidatingConfiguration, Type: rotator.Validating},
			{Name: o.MutatingConfiguration, Type: rotator.Mutating},
		},
		FieldOwner: fieldOwner,
		// The CA is injected once the first certificate is written, not by a concurrent first
		// generation (which would lose the race for the Secret and log it as an error).
		EnableReadinessCheck: true,
		// Every replica serves admission requests, so every replica needs the certificate; concurrent
		// writes of the Secret are settled by its resourceVersion.
		RequireLeaderElection: false,
		ControllerName:        o.RotatorName,
	}); err != nil {
		return nil, fmt.Errorf("add the webhook certificate rotator: %w", err)
	}
	files, err := newCertFiles(mgr, secret, o.CertDir)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(files); err != nil {
		return nil, fmt.Errorf("add the webhook certificate writer: %w", err)
	}
	if err := mgr.Add(&registerWhenReady{ready: certsReady, registration: r}); err != nil {
		return nil, fmt.Errorf("add the webhook registration: %w", err)
	}
	return r.check, nil
}

// registration registers the webhooks once and tells the readiness check.
type registration struct {
	mgr      ctrl.Manager
	defaults webhookv1beta1.Defaults
	// memberPod is Options.MemberPod.
	memberPod func(*etcdv1beta1.EtcdCluster) *corev1.Pod
	done      chan struct{}
	trust     *trustCheck
	log       logr.Logger
	// conversion keeps the CRDs' conversion webhook; nil when it is not kept.
	conversion *conversionKeeper

	// mu guards last, the previous verdict of check ("" when ready).
	mu   sync.Mutex
	last string
}

// register registers the EtcdCluster webhooks, which adds (and, when mgr runs, starts) the server.
func (r *registration) register() error {
	if err := webhookv1beta1.SetupEtcdClusterWebhookWithManager(r.mgr, r.defaults, r.memberPod); err != nil {
		return fmt.Errorf("register the EtcdCluster webhooks: %w", err)
	}
	close(r.done)
	return nil
}

// check is a healthz.Checker: an error until the webhooks are registered, their server accepts TLS
// connections, and the caBundles of the webhook configurations trust the certificate it presents.
func (r *registration) check(req *http.Request) error {
	return r.report(r.verdict(req))
}

// verdict is check without the log.
func (r *registration) verdict(req *http.Request) error {
	select {
	case <-r.done:
	default:
		return errors.New("the webhook serving certificate is not ready yet")
	}
	if err := r.mgr.GetWebhookServer().StartedChecker()(req); err != nil {
		return err
	}
	caBundle, err := r.trust.check(req.Context())
	if err != nil {
		return err
	}
	if r.conversion != nil && !r.conversion.trusts(caBundle) {
		r.conversion.poke()
		return errors.New("the CRDs' conversion webhook does not point at this operator's Service with the webhooks' caBundle yet")
	}
	return nil
}

// report logs err when the verdict changed since the last check, and returns it. The reason a pod is
// not ready shows nowhere else: /readyz withholds it and kubelet records only the status code.
func (r *registration) report(err error) error {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if msg == r.last {
		return err
	}
	r.last = msg
	if err != nil {
		r.log.Info("Not ready: the API server cannot call the admission webhooks", "reason", msg)
	} else {
		r.log.Info("Ready: the admission webhooks are served with a certificate their caBundle trusts")
	}
	return err
}

// registerWhenReady is a manager.Runnable that registers the webhooks when ready is closed. It runs on
// every replica, leader or not.
type registerWhenReady struct {
	ready        <-chan struct{}
	registration *registration
}

// Start waits for the certificate, then registers the webhooks; it returns at once after that.
func (w *registerWhenReady) Start(ctx context.Context) error {
	select {
	case <-w.ready:
		ctrl.Log.WithName("webhook").Info("Webhook certificate ready: serving the admission webhooks")
		return w.registration.register()
	case <-ctx.Done():
		return nil
	}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: webhooks are served by every replica.
func (*registerWhenReady) NeedLeaderElection() bool { return false }
