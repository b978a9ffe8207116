package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/membership"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// bootstrap creates the claims and pods of every initial member of a cluster that has not formed yet
// (a new one, or one an automatic restore recreates) at once, all with --initial-cluster-state=new and
// the full --initial-cluster: they start in parallel and form the cluster as soon as they can reach
// each other.
func (r *EtcdClusterReconciler) bootstrap(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	if s.m.Formed() {
		return nil, nil
	}
	names := resources.InitialMemberNames(c)
	initial := r.Options.InitialCluster(c, names)
	if len(s.m.ForeignClaims) > 0 {
		st := verdict.Blocked(etcdv1beta1.ReasonInvalidSpec, fmt.Sprintf(
			"Claims %s hold the data of an earlier cluster named %s (kept by storage.retainPolicy Retain); a new cluster does not start on them: delete them, or give this cluster another name",
			strings.Join(s.m.ForeignClaims, ", "), c.Name))
		r.event(c, corev1.EventTypeWarning, "ForeignClaims", "Bootstrap", "%s", st.Message)
		return st, nil
	}
	plan, wait, err := r.restorePlan(ctx, s)
	if err != nil || wait != nil {
		return wait, err
	}
	rebuilt, err := r.rebuildInitialPods(ctx, s, names)
	if err != nil {
		return nil, err
	}
	var created []string
	for _, name := range names {
		have := s.m.Member(name)
		if have != nil && have.Pod != nil {
			continue
		}
		m := resources.Member{Name: name, InitialClusterState: resources.StateNew, InitialCluster: initial}
		if have != nil && have.Claim != nil {
			m = have.StartedAs()
		} else if want := r.Options.BuildPVC(c, m); want != nil {
			if err := r.Create(ctx, want); apierrors.IsAlreadyExists(err) {
				// not seen by this pass (still going away, or not ours): never start a member on a claim
				// this pass did not see as ours; the next pass looks again
				continue
			} else if err != nil {
				return nil, fmt.Errorf("create persistentvolumeclaim %s: %w", want.Name, err)
			}
		}
		m.AwaitPeerAddresses = true // the cluster forms once every member's name resolves
		if st, err := r.createPod(ctx, s, m); err != nil || st != nil {
			return st, err
		}
		created = append(created, name)
	}
	if len(rebuilt) == 0 { // else the next pass, which sees the new pods
		if err := r.markPeersAddressed(ctx, s, names); err != nil {
			return nil, err
		}
	}
	r.createdEvents(c, created, len(names), plan)
	if len(rebuilt) > 0 {
		return verdict.Acting(etcdv1beta1.ReasonBootstrapping, fmt.Sprintf(
			"Recreating the pods of %s: their etcd did not run", strings.Join(rebuilt, "; "))), nil
	}
	return bootstrapWaiting(s, names, plan), nil
}

// bootstrapWaiting is the step of a bootstrap that waits for its initial members names (restoring
// plan's snapshot, when not nil) to form the cluster: what they wait for, and what keeps their pods
// from it. While every one has a pod (not being deleted) and none of them runs etcd yet, the step is
// Watched: what comes next (the pod's address, an init container's end, etcd starting) is a pod update.
func bootstrapWaiting(s *scope, names []string, plan *resources.RestorePlan) *verdict.Step {
	who := membership.CountMembers(len(names))
	reason, msg := etcdv1beta1.ReasonBootstrapping, fmt.Sprintf("Waiting for %s to start and form a cluster", who)
	if verdict.Recovering(s.cluster) {
		reason = etcdv1beta1.ReasonRestoringFromBackup
	}
	if plan != nil {
		msg = fmt.Sprintf("Waiting for %s to restore snapshot %s, start and form a new cluster", who, plan.Key)
		if failed := verdict.RestoreFailures(s.m); len(failed) > 0 {
			return verdict.Acting(reason, msg+fmt.Sprintf("; the restore fails (fix what it says, it is retried): %s", strings.Join(failed, "; ")))
		}
	}
	if stuck := verdict.PodProblems(s.m); len(stuck) > 0 {
		msg += "; " + strings.Join(stuck, "; ")
		if slices.ContainsFunc(s.m.Pods(), (*model.Member).ImageUnavailable) {
			msg += " (check spec.version and spec.image: the pods are rebuilt when either changes)"
		}
	}
	st := verdict.Acting(reason, msg)
	st.Watched = !slices.ContainsFunc(names, func(name string) bool {
		m := s.m.Member(name)
		return m == nil || !m.HasPod() || m.EtcdRunning()
	})
	return st
}

// rebuildInitialPods deletes the pods of the initial members names that verdict.BootstrapPodToRebuild
// holds for (built from an older spec, or without their claim, their etcd not running), so that the
// next pass recreates them with the current spec on their claims (new ones for those gone), and
// returns, for each, its name and why ("demo-1 (its claim is gone …)").
func (r *EtcdClusterReconciler) rebuildInitialPods(ctx context.Context, s *scope, names []string) ([]string, error) {
	var rebuilt []string
	for _, name := range names {
		have := s.m.Member(name)
		if have == nil {
			continue
		}
		why := verdict.BootstrapPodToRebuild(s.m, have, r.Options)
		if why == "" {
			continue
		}
		// only the pod this pass looked at goes
		if err := r.Delete(ctx, have.Pod, client.Preconditions{UID: &have.Pod.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return nil, fmt.Errorf("delete pod %s (%s): %w", name, why, err)
		}
		r.eventAbout(s.cluster, memberRef(s.cluster, name), corev1.EventTypeNormal, "UpdatingMember", "Restart", "Deleted pod %s (%s) to recreate it", name, why)
		rebuilt = append(rebuilt, name+" ("+why+")")
	}
	return rebuilt, nil
}

// markPeersAddressed marks the pods of the initial members names with
// etcdv1beta1.AnnotationPeersAddressed once every one of them has its address, and so its DNS name
// (the peer Service publishes the addresses of pods that are not ready): their init containers
// await-peers then let etcd start, and no etcd looks a peer's name up before it exists.
func (r *EtcdClusterReconciler) markPeersAddressed(ctx context.Context, s *scope, names []string) error {
	var waiting []*corev1.Pod
	for _, name := range names {
		m := s.m.Member(name)
		if m == nil || !m.HasPod() || m.Pod.Status.PodIP == "" {
			return nil
		}
		if m.AwaitsPeerAddresses() {
			waiting = append(waiting, m.Pod)
		}
	}
	if len(waiting) == 0 {
		return nil
	}
	// the annotation first, which reaches every pod a second or two later, so that nothing delays it;
	// then the word, at once where the pod can be reached
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+etcdv1beta1.AnnotationPeersAddressed+`":"true"}}}`))
	for _, p := range waiting {
		if err := r.Patch(ctx, p.DeepCopy(), patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("mark pod %s: every initial member has its address: %w", p.Name, err)
		}
	}
	unreached := make([]string, len(waiting))
	var wg sync.WaitGroup
	for i, p := range waiting {
		wg.Go(func() {
			if err := tellPeersAddressedSoon(ctx, p.Status.PodIP); err != nil {
				unreached[i] = fmt.Sprintf("%s: %v", p.Name, err)
			}
		})
	}
	wg.Wait()
	unreached = slices.DeleteFunc(unreached, func(s string) bool { return s == "" })
	log.FromContext(ctx).V(1).Info("every initial member's pod has its address: etcd starts", "pods", len(waiting), "unreached", unreached)
	return nil
}

// peersAddressedClient posts the word to await-peers: plain HTTP to a pod IP, never through a proxy.
var peersAddressedClient = &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}

// peersAddressedRetry is how long tellPeersAddressedSoon tries a pod whose await-peers does not listen
// yet, and how often.
const peersAddressedRetry, peersAddressedRetryEvery = 2 * time.Second, 100 * time.Millisecond

// tellPeersAddressedSoon is tellPeersAddressed, tried again every peersAddressedRetryEvery for up to
// peersAddressedRetry while the pod refuses the connection: a pod has its address once its sandbox is
// up, and on a loaded node its await-peers container may start listening a second or more later.
func tellPeersAddressedSoon(ctx context.Context, ip string) error {
	deadline := time.Now().Add(peersAddressedRetry)
	for {
		err := tellPeersAddressed(ctx, ip)
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(peersAddressedRetryEvery):
		}
	}
}

// tellPeersAddressed tells the init container await-peers of the pod at ip, on its peer port, that
// every initial member's pod has its address.
func tellPeersAddressed(ctx context.Context, ip string) error {
	url := "http://" + net.JoinHostPort(ip, strconv.Itoa(resources.PeerPort)) + resources.PeersAddressedPath
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return err
	}
	resp, err := peersAddressedClient.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// createdEvents records the events of a bootstrap pass that created the pods of members created (of a
// cluster of n), which restore plan's snapshot when plan is not nil; none when it created none.
func (r *EtcdClusterReconciler) createdEvents(c *etcdv1beta1.EtcdCluster, created []string, n int, plan *resources.RestorePlan) {
	if len(created) == 0 {
		return
	}
	what := "members " + strings.Join(created, ", ")
	if len(created) == 1 {
		what = "member " + created[0]
	}
	r.event(c, corev1.EventTypeNormal, "CreatedMembers", "Create", "Created %s to bootstrap a %d-member cluster", what, n)
	if plan != nil {
		r.event(c, corev1.EventTypeNormal, "RestoringFromBackup", "Restore", "Members %s restore snapshot %s before they start", strings.Join(created, ", "), plan.Key)
	}
}
