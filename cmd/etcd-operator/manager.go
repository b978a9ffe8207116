package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/certs"
	"github.com/etcdkit/etcd-operator/internal/controller"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/metrics"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/ownedcache"
	"github.com/etcdkit/etcd-operator/internal/probe"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/storageversion"
	"github.com/etcdkit/etcd-operator/internal/webhook"
)

// managerOptions are the manager's flags.
type managerOptions struct {
	metricsAddr         string
	metricsSecure       bool
	metricsCertDir      string
	enableHTTP2         bool
	probeAddr           string
	pprofAddr           string
	leaderElect         bool
	leaderElectionNS    string
	leaseDuration       time.Duration
	renewDeadline       time.Duration
	retryPeriod         time.Duration
	watchNamespaces     []string
	namespaced          bool
	clusterDomain       string
	imageRepository     string
	healthCheckInterval time.Duration
	probeInterval       time.Duration
	syncPeriod          time.Duration
	etcdTimeout         time.Duration
	recoveryDelay       time.Duration
	tlsSwitchGrace      time.Duration
	caRotationDwell     time.Duration
	awaitAdd            bool
	consistencyInterval time.Duration
	operatorImage       string
	maxConcurrent       int
	enableWebhooks      bool
	webhook             webhook.Options
	zap                 zap.Options
	// skipNameValidation lets a test start a second manager in its process (controller names are
	// unique per process otherwise); no flag sets it.
	skipNameValidation bool
}

func newManagerCommand() *cobra.Command {
	return managerCommand(&managerOptions{zap: zap.Options{Development: false, TimeEncoder: zapcore.ISO8601TimeEncoder}})
}

// managerCommand is the manager command that parses its flags into o.
func managerCommand(o *managerOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Run the controllers (the default)",
		RunE:  func(cmd *cobra.Command, _ []string) error { return runManager(cmd.Context(), o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "Address of the Prometheus metrics endpoint (HTTPS unless --metrics-secure=false); 0 disables it")
	f.BoolVar(&o.metricsSecure, "metrics-secure", true, "Serve metrics over HTTPS to clients whose bearer token the API server authenticates (TokenReview) and authorizes for GET on the non-resource URL /metrics (SubjectAccessReview); false serves them over plain HTTP to anyone who can connect")
	f.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "Directory of the metrics server's tls.crt and tls.key (reloaded when they change); without them the operator serves a self-signed certificate it generates at start")
	f.BoolVar(&o.enableHTTP2, "enable-http2", false, "Let the metrics server speak HTTP/2; off by default against the HTTP/2 rapid reset and stream flooding attacks (CVE-2023-44487, CVE-2023-39325). The webhook server always speaks HTTP/1.1")
	f.StringVar(&o.pprofAddr, "pprof-bind-address", "", "Address of Go's /debug/pprof profiles (heap, CPU, goroutines), plain HTTP to anyone who can connect; empty (the default) serves none")
	f.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of /healthz (the process runs) and /readyz (the caches are synced and it can reconcile; the admission webhooks answer)")
	f.BoolVar(&o.leaderElect, "leader-elect", false, "Hold a Lease so that only one of several replicas reconciles")
	f.StringVar(&o.leaderElectionNS, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the operator's own namespace)")
	f.StringSliceVar(&o.watchNamespaces, "watch-namespaces", nil, "Namespaces to watch, comma separated (default: all; with --namespaced, the operator's own namespace)")
	f.BoolVar(&o.namespaced, "namespaced", false, "Run with the namespace-scoped install's permissions (Roles in the watched namespaces): watch only --watch-namespaces, by default the operator's own namespace (POD_NAMESPACE), never the whole cluster")
	f.StringVar(&o.clusterDomain, "cluster-domain", "cluster.local", "DNS domain of the Kubernetes cluster; members' peer and client URLs end in it")
	f.StringVar(&o.imageRepository, "etcd-image-repository", resources.DefaultImageRepository, "Repository of etcd images; a cluster's image is <repository>:v<spec.version> unless spec.image is set")
	f.DurationVar(&o.healthCheckInterval, "health-check-interval", controller.DefaultHealthCheckInterval, "How often a healthy cluster's etcd status is read again when nothing changed in Kubernetes")
	f.DurationVar(&o.syncPeriod, "sync-period", 10*time.Minute, "How often every object is reconciled even without a change")
	f.DurationVar(&o.probeInterval, "member-probe-interval", probe.DefaultInterval, "How often each member is asked for its status between passes, so that a member that stops answering or loses its leader is seen at once; 0 turns it off")
	f.DurationVar(&o.etcdTimeout, "etcd-timeout", 3*time.Second, "Timeout of each etcd call")
	f.DurationVar(&o.recoveryDelay, "quorum-loss-restore-delay", controller.DefaultRecoveryDelay, "How long a quorum loss without data must last before a cluster with spec.recovery.restoreOnQuorumLoss is recreated from its newest backup")
	f.DurationVar(&o.tlsSwitchGrace, "tls-switch-grace", model.DefaultTLSSwitchGrace, "While spec.tls.client.enabled is switched for a running cluster, how long every member serves both http:// and https:// on its client port before only the new scheme, for clients to move over")
	f.BoolVar(&o.awaitAdd, "create-pods-before-add", true, "Create each member's claim and pod before the member is added to etcd, its etcd held back by an init container (await-add) until etcd lists it, and add it once the cluster's DNS serves its name: the leader's first lookup of that name then finds it, and the volumes of every member to add are provisioned together; false adds every member first, then creates its pod")
	f.DurationVar(&o.caRotationDwell, "ca-rotation-dwell", certs.CARotationDwell, "How long each phase of a CA rotation (the operator's CA, or a cert-manager issuer's CA) lasts at least, for clients that mount a cluster's client Secret to load the new trust bundle and certificate (the kubelet refreshes mounted Secrets within about a minute)")
	f.IntVar(&o.maxConcurrent, "max-concurrent-reconciles", controller.DefaultMaxConcurrentReconciles, "How many EtcdClusters are reconciled at once (passes of one cluster never overlap)")
	f.StringVar(&o.operatorImage, "operator-image", "", "Image that backup Jobs and restore init containers run (the etcd-operator binary as entrypoint); default: this pod's own image, read through POD_NAME and POD_NAMESPACE")
	f.DurationVar(&o.consistencyInterval, "consistency-check-interval", controller.DefaultConsistencyCheckInterval, "How often the members' key-value hashes are compared (DataInconsistent condition); they are also compared within about a minute of a member's etcd starting, joining or leaving. 0 turns every comparison off")
	f.BoolVar(&o.enableWebhooks, "enable-webhooks", true, "Serve the EtcdCluster admission webhooks (defaulting and validation); false to run the manager outside a cluster, where the API server cannot call them")
	f.IntVar(&o.webhook.Port, "webhook-port", webhook.DefaultPort, "Port of the admission webhooks' HTTPS server")
	f.StringVar(&o.webhook.CertDir, "webhook-cert-dir", webhook.DefaultCertDir, "Directory of the webhook server's tls.crt and tls.key: written by the operator with --webhook-cert-provisioner=self, mounted with external")
	f.StringVar((*string)(&o.webhook.Provisioner), "webhook-cert-provisioner", string(webhook.ProvisionerSelf), "Where the webhook serving certificate comes from: self (the operator generates a CA and a certificate into --webhook-secret-name, puts the CA into its webhook configurations and renews both before they expire) or external (mounted into --webhook-cert-dir, for example by cert-manager; nothing is generated)")
	f.StringVar(&o.webhook.SecretName, "webhook-secret-name", webhook.DefaultSecretName, "Secret in the operator's namespace (POD_NAMESPACE) that holds the generated CA and certificate (self provisioner); it must exist, possibly empty")
	f.BoolVar(&o.webhook.Defaults.NetworkPolicy, "network-policy-by-default", false, "Give every new EtcdCluster that does not mention spec.networkPolicy a NetworkPolicy (spec.networkPolicy.enabled: true); turn it on where the cluster's network plugin enforces NetworkPolicies")
	f.StringVar(&o.webhook.ServiceName, "webhook-service-name", webhook.DefaultServiceName, "Service in front of the webhook server; the generated certificate is for <name>.<namespace>.svc")
	leaderElectionFlags(f, o)
	zfs := flag.NewFlagSet("zap", flag.ContinueOnError)
	o.zap.BindFlags(zfs)
	f.AddGoFlagSet(zfs)
	return cmd
}

// leaderElectionFlags adds the flags of the Lease's timing to f: client-go's and kube-controller-manager's
// defaults, so that a replica that dies without handing the Lease back is replaced within about
// leaseDuration plus retryPeriod (17 s).
func leaderElectionFlags(f *pflag.FlagSet, o *managerOptions) {
	f.DurationVar(&o.leaseDuration, "leader-election-lease-duration", 15*time.Second, "How long the other replicas wait for a Lease that is no longer renewed before one of them takes it")
	f.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", 10*time.Second, "How long the leader keeps trying to renew its Lease before it stops leading (and exits); below --leader-election-lease-duration")
	f.DurationVar(&o.retryPeriod, "leader-election-retry-period", 2*time.Second, "How often the replicas try to take or renew the Lease")
}

// runManager runs the controllers and webhooks until ctx is done.
func runManager(ctx context.Context, o *managerOptions) error {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(etcdv1beta1.AddToScheme(scheme))
	utilruntime.Must(etcdv1alpha1.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))

	o.webhook.Namespace = os.Getenv("POD_NAMESPACE")
	if err := o.scopeNamespaces(); err != nil {
		return err
	}
	o.webhook.ClusterDomain = o.clusterDomain
	var webhookServer crwebhook.Server
	if o.enableWebhooks {
		var err error
		if webhookServer, err = webhook.NewServer(o.webhook); err != nil {
			return err
		}
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  scheme,
		WebhookServer:           webhookServer,
		Cache:                   cacheOptions(o),
		Client:                  client.Options{Cache: &client.CacheOptions{DisableFor: ownedcache.Uncached()}},
		Controller:              config.Controller{SkipNameValidation: ptr.To(o.skipNameValidation)},
		Metrics:                 metricsOptions(o),
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "etcd-operator.etcd.etcdkit.dev",
		LeaderElectionNamespace: o.leaderElectionNS,
		LeaseDuration:           &o.leaseDuration,
		RenewDeadline:           &o.renewDeadline,
		RetryPeriod:             &o.retryPeriod,
		// The process exits right after the manager stops, so handing the Lease back at once is safe,
		// and a new operator pod (a rollout) takes over without waiting out the lease duration.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	opts := memberOptions(ctx, mgr, o)
	o.webhook.MemberPod = opts.AdmissionPod
	if err := setupControllers(mgr, o, opts); err != nil {
		return err
	}
	if err := addChecks(mgr, o); err != nil {
		return err
	}
	log.Info("Starting the manager", "version", version, "watchNamespaces", o.watchNamespaces,
		"webhooks", o.enableWebhooks, "webhookCertProvisioner", o.webhook.Provisioner)
	return mgr.Start(ctx)
}

// The metrics server's filter asks the API server who a scraper is and whether it may read /metrics.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// metricsOptions returns the metrics server's options: HTTPS, each request authenticated and
// authorized by the API server (a scraper needs a role such as config/rbac's metrics-reader), and
// HTTP/1.1 only unless --enable-http2; plain HTTP without either with --metrics-secure=false.
func metricsOptions(o *managerOptions) metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.metricsSecure}
	if !o.metricsSecure {
		return m
	}
	m.FilterProvider = filters.WithAuthenticationAndAuthorization
	m.CertDir = o.metricsCertDir
	if !o.enableHTTP2 {
		m.TLSOpts = append(m.TLSOpts, disableHTTP2)
	}
	return m
}

// disableHTTP2 makes a TLS server offer HTTP/1.1 only.
func disableHTTP2(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }

// errNoNamespace is returned when --namespaced has no namespace to watch.
var errNoNamespace = errors.New("--namespaced needs the namespaces to watch: set --watch-namespaces, or POD_NAMESPACE " +
	"(the Deployment sets it from the downward API) to watch the operator's own namespace; " +
	"without them the operator would watch the whole cluster, which the namespace-scoped install does not permit")

// scopeNamespaces defaults the watched namespaces of a namespace-scoped operator to its own, and
// refuses to start one that would watch the whole cluster.
func (o *managerOptions) scopeNamespaces() error {
	if !o.namespaced || len(o.watchNamespaces) > 0 {
		return nil
	}
	if o.webhook.Namespace == "" {
		return errNoNamespace
	}
	o.watchNamespaces = []string{o.webhook.Namespace}
	return nil
}

// cacheOptions returns the manager's cache options: the sync period, the watched namespaces, and
// ownedcache's: of the kinds the operator creates only its own objects, not every one of the cluster,
// each without its managedFields.
func cacheOptions(o *managerOptions) cache.Options {
	cacheOpts := ownedcache.Options()
	cacheOpts.SyncPeriod = &o.syncPeriod
	if len(o.watchNamespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.watchNamespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return cacheOpts
}

// memberOptions returns how the operator builds the members' objects, from its flags and its own pod
// (found through mgr's API reader, as it is not started yet).
func memberOptions(ctx context.Context, mgr ctrl.Manager, o *managerOptions) resources.Options {
	log := ctrl.Log.WithName("setup")
	opts := resources.Options{ClusterDomain: o.clusterDomain, ImageRepository: o.imageRepository, OperatorImage: o.operatorImage,
		TLSSwitchGrace: o.tlsSwitchGrace, CARotationDwell: o.caRotationDwell, AwaitAdd: o.awaitAdd}
	if pod, err := ownPod(ctx, mgr.GetAPIReader()); err != nil {
		log.Info("Without its own pod, the operator cannot run backup Jobs and restores until --operator-image is set, "+
			"nor keep NetworkPolicies (spec.networkPolicy)", "reason", err.Error())
	} else {
		// a NetworkPolicy lets the operator's pods reach the members: they are selected by these
		opts.OperatorNamespace, opts.OperatorPodLabels = pod.Namespace, pod.Labels
		if opts.OperatorImage == "" && len(pod.Spec.Containers) > 0 {
			opts.OperatorImage, opts.OperatorImagePullPolicy = pod.Spec.Containers[0].Image, string(pod.Spec.Containers[0].ImagePullPolicy)
		}
	}
	return opts
}

// setupControllers registers the EtcdCluster and EtcdBackup controllers with mgr; opts is
// memberOptions.
func setupControllers(mgr ctrl.Manager, o *managerOptions, opts resources.Options) error {
	// Reads by name that miss the label-selected cache ask the API server: an object of a name the
	// operator needs, not labelled as its own, is seen before one is created (ownedcache).
	cli := metrics.CountingClient(ownedcache.Client(mgr.GetClient(), mgr.GetAPIReader()))
	keeper := &certs.Keeper{Client: cli, APIReader: mgr.GetAPIReader(), Options: opts}
	r := &controller.EtcdClusterReconciler{
		Client:              cli,
		Certs:               keeper,
		Recorder:            mgr.GetEventRecorder("etcd-operator"),
		EtcdClient:          etcd.New,
		Options:             opts,
		HealthCheckInterval: o.healthCheckInterval,
		EtcdTimeout:         o.etcdTimeout,
		RecoveryDelay:       o.recoveryDelay,
		APIReader:           mgr.GetAPIReader(),
	}
	if o.probeInterval > 0 {
		p := probe.New(probe.MemberPods(mgr.GetClient(), keeper.ClientTLS))
		p.Interval = o.probeInterval
		if err := mgr.Add(p); err != nil {
			return fmt.Errorf("add the member prober: %w", err)
		}
		r.MemberEvents = p.Events()
	}
	r.MaxConcurrentReconciles = o.maxConcurrent
	r.ConsistencyCheckInterval = o.consistencyInterval
	if o.consistencyInterval == 0 {
		r.ConsistencyCheckInterval = -1 // disabled
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the EtcdCluster controller: %w", err)
	}
	br := &controller.EtcdBackupReconciler{
		Client:   cli,
		Recorder: mgr.GetEventRecorder("etcd-operator"),
		Options:  opts,
	}
	if err := br.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the EtcdBackup controller: %w", err)
	}
	// Objects an operator of v1alpha1 stored are rewritten once in v1beta1, the storage version.
	if err := mgr.Add(&storageversion.Migrator{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient(), Namespaces: o.watchNamespaces,
		Log: ctrl.Log.WithName("storageversion")}); err != nil {
		return fmt.Errorf("add the storage version migrator: %w", err)
	}
	return nil
}

// addChecks adds the liveness and readiness checks and, with webhooks, sets them up: the operator is
// ready once its caches have synced and its webhooks answer.
func addChecks(mgr ctrl.Manager, o *managerOptions) error {
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("add healthz check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", cacheSynced(mgr)); err != nil {
		return fmt.Errorf("add readyz check: %w", err)
	}
	if o.enableWebhooks {
		// Not ready until the webhooks answer: a rollout of the operator completes only once admission
		// works, and the webhook Service only sends requests to pods that can answer them.
		served, err := webhook.Setup(mgr, o.webhook)
		if err != nil {
			return fmt.Errorf("set up the admission webhooks: %w", err)
		}
		if err := mgr.AddReadyzCheck("webhook", served); err != nil {
			return fmt.Errorf("add webhook readyz check: %w", err)
		}
	}
	return nil
}

// cacheSynced is a readiness check: ready once the informer caches have synced.
func cacheSynced(mgr ctrl.Manager) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 100*time.Millisecond)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("informer caches have not synced")
		}
		return nil
	}
}

// ownPodBackoff is how long ownPod retries while the API server does not answer: about 25 s.
var ownPodBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Steps: 6, Cap: 8 * time.Second}

// ownPod returns the operator's own pod, named by the POD_NAME and POD_NAMESPACE environment variables
// (the downward API in config/manager). It retries (ownPodBackoff) while the read fails for a reason
// other than the pod being missing or the read forbidden, so that an API server that does not answer
// at start-up does not leave the operator without its pod (and so without NetworkPolicies and backup
// Jobs) until its next restart.
func ownPod(ctx context.Context, r client.Reader) (*corev1.Pod, error) {
	name, ns := os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE")
	if name == "" || ns == "" {
		return nil, errors.New("POD_NAME and POD_NAMESPACE are not set")
	}
	pod := &corev1.Pod{}
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, ownPodBackoff, func(ctx context.Context) (bool, error) {
		getCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		last = r.Get(getCtx, client.ObjectKey{Namespace: ns, Name: name}, pod)
		if apierrors.IsNotFound(last) || apierrors.IsForbidden(last) {
			return false, last
		}
		return last == nil, nil
	})
	if err != nil {
		if last != nil {
			err = last
		}
		return nil, fmt.Errorf("read the operator's own pod %s/%s: %w", ns, name, err)
	}
	return pod, nil
}
