// Package controller holds the reconcilers of the etcd.etcdkit.dev kinds. A reconciler runs short,
// idempotent phases over what it observed once per pass; decisions live in pure functions, objects are
// built by package resources, and etcd is reached only through package etcd.
package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/auth"
	"github.com/etcdkit/etcd-operator/internal/certs"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/metrics"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/observe"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// DefaultHealthCheckInterval is how often a healthy cluster's etcd status is read again when nothing
// in Kubernetes changed (leader, versions, database sizes).
const DefaultHealthCheckInterval = 60 * time.Second

// EtcdClusterReconciler reconciles EtcdCluster objects.
type EtcdClusterReconciler struct {
	client.Client
	// Recorder records an event for every action taken on a cluster.
	Recorder events.EventRecorder
	// EtcdClient creates clients for the members' etcd endpoints.
	EtcdClient etcd.Factory
	// Auth finds the root password of clusters with spec.auth (default: one over Client and the manager's API reader).
	Auth *auth.Keeper
	// Certs keeps the clusters' TLS Secrets and the operator's client certificates (default: one over Client).
	Certs *certs.Keeper
	// Options are the settings of the objects the operator builds.
	Options resources.Options
	// HealthCheckInterval is how often a healthy cluster is looked at again (default 60 s).
	HealthCheckInterval time.Duration
	// MemberEvents, when set, wakes a cluster when one of its member pods is sent: a member whose
	// answer changed between passes (probe.Prober's Events).
	MemberEvents <-chan event.GenericEvent
	// EtcdTimeout bounds each etcd call of a pass (default 3 s).
	EtcdTimeout time.Duration
	// ConsistencyCheckInterval is how often the members' key-value hashes are compared (default 10
	// minutes; negative disables the check).
	ConsistencyCheckInterval time.Duration

	// RecoveryDelay is how long a quorum loss without data must last before an automatic restore
	// (spec.recovery.restoreOnQuorumLoss) starts (default DefaultRecoveryDelay, 30 s).
	RecoveryDelay time.Duration
	// APIReader reads the cluster uncached before a destructive recovery step, so that the step is never
	// taken on a stale copy (default: Client).
	APIReader client.Reader

	// MaxConcurrentReconciles is how many clusters are reconciled at once (default
	// DefaultMaxConcurrentReconciles); passes of one cluster never overlap.
	MaxConcurrentReconciles int

	consistency observe.Clock
	// published is when a pass first saw each awaiting pod's address published (awaitPublished).
	published firstSeen
	// drainedUnready is when a pass first saw each pod drained for its member's removal not Ready, by
	// pod UID and the drain's transition time, so that a later drain of the same pod counts anew
	// (drainForRemoval).
	drainedUnready firstSeen
	// terminating holds the clusters whose namespace is being deleted (refusedAsTerminating).
	terminating terminatingClusters
}

// scope is what one pass observed, once, and what it found out for the status.
type scope struct {
	cluster *etcdv1beta1.EtcdCluster
	// m is what the pass observed of the cluster: its members' pods, claims and what etcd reported.
	m *model.Cluster
	// in is what m was built from.
	in model.Input
	// etcdClient reaches the members that run; nil when none does. Closed at the end of the pass.
	etcdClient etcd.Client
	// etcdBase is etcdClient's configuration but for its endpoints: TLS and credentials.
	etcdBase etcd.Config
	// restore is the snapshot the initial members restore, once resolved in this pass (it reads the
	// EtcdBackup it names).
	restore *resources.RestorePlan
	// creds are the root user's credentials, for a cluster with spec.auth.
	creds *auth.Credentials
	// report is what the phases found out for the status beside the pass's step; only the status
	// (verdict.Status) reads it.
	report verdict.Report
	// certs is what the TLS phase made of the cluster's certificates; pods are the member pods it listed.
	certs certs.Result
	pods  corev1.PodList
	// pdb is the cluster's PodDisruptionBudget as reconcilePDB left it; nil when it could not, or when
	// one of that name is not the cluster's.
	pdb *policyv1.PodDisruptionBudget
	// rolloutFailed is the step of a rollout that restarts no member because the current spec was
	// rolled back (verdict.RolloutFailed): the pass's step when no later phase has one.
	rolloutFailed *verdict.Step
}

// phase is one part of a pass, over what the pass observed. It returns nil to let the next phase run,
// or the step it took or waits for, which ends the pass.
type phase func(context.Context, *scope) (*verdict.Step, error)

// +kubebuilder:rbac:groups=etcd.etcdkit.dev,resources=etcdclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=etcd.etcdkit.dev,resources=etcdclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=etcd.etcdkit.dev,resources=etcdclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods;persistentvolumeclaims;services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile moves one EtcdCluster one step closer to its spec and records what it observed.
func (r *EtcdClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := &etcdv1beta1.EtcdCluster{}
	if err := r.Get(ctx, req.NamespacedName, c); err != nil {
		if apierrors.IsNotFound(err) {
			metrics.ForgetCluster(req.Namespace, req.Name) // gone: so are its series
			r.terminating.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !c.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, c)
	}
	if controllerutil.AddFinalizer(c, etcdv1beta1.Finalizer) {
		if err := r.Update(ctx, c); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
		return ctrl.Result{}, nil // the update brings a new event
	}

	// until observe runs, the model holds only what the status recorded: a pass stopped before it
	// reports what it knew
	s := &scope{cluster: c, m: model.Build(model.Input{Cluster: c, EtcdErr: model.ErrNotObserved})}
	defer func() {
		if s.etcdClient != nil {
			_ = s.etcdClient.Close()
		}
	}()
	before := c.Status.DeepCopy()
	if r.terminating.has(c, time.Now()) {
		// an earlier pass was refused a create: every later one would be too
		verdict.Status(c, s.m, &s.report, terminatingNamespaceStep(c), r.Options, true)
		return terminatingResult(r.patchStatus(ctx, c, before))
	}
	st, err := r.reconcilePhases(ctx, s)
	terminating := r.refusedAsTerminating(ctx, c, st, err)
	if terminating {
		st, err = terminatingNamespaceStep(c), nil
	}
	phaseErr := err
	if err != nil {
		st = verdict.Acting(etcdv1beta1.ReasonReconcileError, fmt.Sprintf("%v; retrying with backoff", err))
		r.event(c, corev1.EventTypeWarning, etcdv1beta1.ReasonReconcileError, "Reconcile", "%v", err)
	}
	verdict.Status(c, s.m, &s.report, st, r.Options, err == nil)
	metrics.RecordPass(s.m, st)
	patchErr := r.patchStatus(ctx, c, before)
	if patchErr != nil {
		err = errors.Join(err, patchErr)
	}
	if terminating {
		return terminatingResult(patchErr)
	}
	if phaseErr == nil && patchErr != nil && apierrors.IsConflict(patchErr) {
		// the pass worked on a stale copy: look again at the newest one, without an error
		return ctrl.Result{RequeueAfter: verdict.RequeueProgressing}, nil
	}
	if err != nil {
		// controller-runtime logs the returned error with the object's name, and backs off.
		return ctrl.Result{}, err
	}
	return r.requeueFor(s, st), nil
}

// reconcilePhases runs the phases of a live cluster in order, until one takes a step (one that blocks
// before the observation still lets it run, for the status: observeBlocked). Services, the root
// Secret, the certificates, the observation, spec validation, backups, the pause (spec.paused ends the
// pass here: requests by annotation wait), the refusal of requests that can never be carried out, claim ownership, the PodDisruptionBudget and volume
// expansion come first: they hold whatever the members do. Then the member phases, the first that
// applies acting: an automatic restore, the bootstrap, recreating lost pods, a quorum lost, the CORRUPT
// alarm of a replaced member, a membership change, a rolling restart, the NOSPACE alarm, a replacement
// requested by annotation, waiting for members that are not healthy; last, on a settled cluster,
// enabling authentication, a switch of spec.tls, a CA rotation, the consistency check, a move of
// leadership and a defragmentation requested by annotation, and maintenance (defragmentation).
func (r *EtcdClusterReconciler) reconcilePhases(ctx context.Context, s *scope) (*verdict.Step, error) {
	for _, p := range []phase{r.reconcileServices, r.reconcileRootSecret, r.reconcileTLS} {
		st, err := p(ctx, s)
		if err == nil && st != nil && st.Kind == verdict.KindBlocked {
			r.observeBlocked(ctx, s)
		}
		if err != nil || st != nil {
			return st, err
		}
	}
	for _, p := range []phase{
		r.observe,
		r.validateSpec,
		r.reconcileBackups,
		r.holdPaused,
		r.refuseRequests,
		r.syncClaimOwnership,
		r.syncRevisions,
		r.reconcilePDB,
		r.reconcileNetworkPolicy,
		r.reconcileVolumes,
		r.reconcileRecovery,
		r.bootstrap,
		r.recreateMembers,
		r.reconcileQuorumLoss,
		r.disarmCorrupt,
		// before membership and rollout: a member whose claim is being deleted loses its data whenever
		// its pod stops, so neither a learner waiting on it nor a restart of another member goes first
		r.reconcileClaimDeleted,
		r.reconcileMembership,
		r.reconcileRollout,
		r.reconcileNoSpace,
		r.reconcileReplaceRequest,
		func(context.Context, *scope) (*verdict.Step, error) { return verdict.AwaitHealthy(s.m), nil },
		// a rollout rolled back from the current spec stops the pass here: what follows (enabling
		// authentication, a switch of spec.tls, a CA rotation, the consistency check, maintenance) expects
		// every member to run a pod of the current spec (etcd reads its TLS files only as it starts)
		func(context.Context, *scope) (*verdict.Step, error) { return s.rolloutFailed, nil },
		r.enableAuth,
		r.switchTLS,
		r.rotateCA,
		r.checkConsistency,
		r.reconcileMoveLeaderRequest,
		r.reconcileDefragRequest,
		r.reconcileMaintenance,
	} {
		if st, err := p(ctx, s); err != nil || st != nil {
			return st, err
		}
	}
	return nil, nil
}

// observeBlocked observes the cluster when a phase before the observation blocked the pass (a Service,
// root Secret or certificate Secret the user must fix), so that the status still reports the members'
// health while nothing else is done; without it, the status would say what it said before the block.
// A cluster with authentication whose root password could not be read is not observed (the members
// would refuse the operator, which the status would report instead of their health).
func (r *EtcdClusterReconciler) observeBlocked(ctx context.Context, s *scope) {
	if s.cluster.Spec.AuthEnabled() && s.creds == nil {
		return
	}
	if s.pods.Items == nil {
		if err := r.List(ctx, &s.pods, client.InNamespace(s.cluster.Namespace), client.MatchingLabels(resources.SelectorLabels(s.cluster))); err != nil {
			return
		}
	}
	_, _ = r.observe(ctx, s)
}

// requeueFor returns when to look again at a cluster after a pass that took step st (verdict.Requeue).
func (r *EtcdClusterReconciler) requeueFor(s *scope, st *verdict.Step) ctrl.Result {
	return ctrl.Result{RequeueAfter: verdict.Requeue(s.cluster, &s.report, st, cmp.Or(r.HealthCheckInterval, DefaultHealthCheckInterval))}
}

// reconcileDelete lets the owner garbage collector remove the pods, claims and Services, and removes the
// finalizer, after a final snapshot when spec.backup.finalSnapshot asks for one (bounded, skipped when
// the cluster is not Available). It makes no etcd call: members are going away together, and a
// cluster without quorum could not answer one anyway.
func (r *EtcdClusterReconciler) reconcileDelete(ctx context.Context, c *etcdv1beta1.EtcdCluster) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(c, etcdv1beta1.Finalizer) {
		return ctrl.Result{}, nil
	}
	if res, done, err := r.finalSnapshot(ctx, c); err != nil || !done {
		return res, err
	}
	r.event(c, corev1.EventTypeNormal, "Deleting", "Delete", "Deleting the cluster's members")
	controllerutil.RemoveFinalizer(c, etcdv1beta1.Finalizer)
	if err := r.Update(ctx, c); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	r.Certs.Forget(c.Namespace, c.Name)
	metrics.ForgetCluster(c.Namespace, c.Name)
	r.terminating.forget(client.ObjectKeyFromObject(c))
	r.consistency.Forget(string(c.UID))
	return ctrl.Result{}, nil
}

// patchStatus writes the status when it differs from what the pass started with.
func (r *EtcdClusterReconciler) patchStatus(ctx context.Context, c *etcdv1beta1.EtcdCluster, before *etcdv1beta1.EtcdClusterStatus) error {
	if verdict.StatusEqual(before, &c.Status) {
		return nil
	}
	orig := c.DeepCopy()
	orig.Status = *before
	// with the resourceVersion the pass read: a pass that worked on a stale copy must not put back what
	// a newer pass wrote (an older member list, a condition's older transition time)
	if err := r.Status().Patch(ctx, c, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patch status: %w", err)
	}
	return nil
}

// event records an event on the cluster about the cluster as a whole.
func (r *EtcdClusterReconciler) event(c *etcdv1beta1.EtcdCluster, eventType, reason, action, note string, args ...any) {
	r.eventAbout(c, nil, eventType, reason, action, note, args...)
}

// eventAbout records an event on the cluster about one of its parts, related: a member's pod, a claim,
// a Secret, an EtcdBackup. The event recorder folds events of one object, type, reason and action
// that follow within minutes into one series that keeps the first note (events.k8s.io/v1 compares
// everything but the note), so that "Added member demo-3" and then "Added member demo-4" would show
// as the first twice; events about different parts are told apart by related.
func (r *EtcdClusterReconciler) eventAbout(c *etcdv1beta1.EtcdCluster, related *corev1.ObjectReference, eventType, reason, action, note string, args ...any) {
	if r.Recorder == nil || r.terminating.has(c, time.Now()) {
		return // no event can be made in a namespace being deleted
	}
	if related == nil {
		r.Recorder.Eventf(c, nil, eventType, reason, action, note, args...)
		return
	}
	r.Recorder.Eventf(c, related, eventType, reason, action, note, args...)
}

// memberRef refers to the pod of member name of cluster c, which need not exist (a member removed
// from etcd, a pod deleted to be recreated): an event's related object.
func memberRef(c *etcdv1beta1.EtcdCluster, name string) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: c.Namespace, Name: name}
}

// objectRef refers to the object kind/name in cluster c's namespace (apiVersion/kind as in a manifest).
func objectRef(c *etcdv1beta1.EtcdCluster, apiVersion, kind, name string) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Namespace: c.Namespace, Name: name}
}

// SetupWithManager registers the reconciler: it watches EtcdClusters and the pods, claims and Services
// they own.
func (r *EtcdClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Certs == nil {
		r.Certs = &certs.Keeper{Client: r.Client, APIReader: mgr.GetAPIReader(), Options: r.Options}
	}
	if r.Auth == nil {
		r.Auth = &auth.Keeper{Client: r.Client, Reader: mgr.GetAPIReader()}
	}
	b := ctrl.NewControllerManagedBy(mgr)
	if r.MemberEvents != nil { // a member whose answer changed between passes (package probe)
		b = b.WatchesRawSource(source.Channel(r.MemberEvents, handler.EnqueueRequestsFromMapFunc(resources.ClusterOfLabels)))
	}
	return b.
		For(&etcdv1beta1.EtcdCluster{}, builder.WithPredicates(notOnlyLoad())).
		Owns(&corev1.Pod{}).
		// Claims by label, not owner: a claim kept by retainPolicy Retain has no owner but still matters.
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(resources.ClusterOfLabels)).
		Owns(&corev1.Service{}).
		Owns(&corev1.Secret{}).
		// and by label: cert-manager writes the Secrets of spec.tls.issuerRef with the cluster's labels
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(resources.ClusterOfLabels)).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Owns(&appsv1.ControllerRevision{}, builder.WithPredicates(deletedOnly())).
		Watches(&etcdv1beta1.EtcdBackup{}, handler.EnqueueRequestsFromMapFunc(resources.ClusterOfBackup)).
		Named("etcdcluster").
		// Passes of different clusters run in parallel: one cluster whose members do not answer (each
		// etcd call waits out its timeout) must not delay the others.
		WithOptions(controller.Options{MaxConcurrentReconciles: cmp.Or(r.MaxConcurrentReconciles, DefaultMaxConcurrentReconciles)}).
		Complete(r)
}

// DefaultMaxConcurrentReconciles is how many clusters are reconciled at once by default.
const DefaultMaxConcurrentReconciles = 4

// uncached is the reader of what the API server holds now, not the cache's copy: APIReader, or Client
// when it is not set.
func (r *EtcdClusterReconciler) uncached() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}
