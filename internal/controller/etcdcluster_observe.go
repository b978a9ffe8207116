package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// defaultEtcdTimeout bounds each etcd call of a pass.
const defaultEtcdTimeout = 3 * time.Second

// statusTimeout bounds a member's Status call, which it answers locally without raft.
const statusTimeout = time.Second

// etcdTimeout is the bound of each etcd call.
func (r *EtcdClusterReconciler) etcdTimeout() time.Duration {
	if r.EtcdTimeout == 0 {
		return defaultEtcdTimeout
	}
	return r.EtcdTimeout
}

// etcdObservation is what etcd reported in one pass.
type etcdObservation struct {
	clusterID uint64
	members   []etcd.Member
	// status and health of each member that answered, by member ID; a member that did not answer has
	// no status entry and a health error.
	status map[uint64]etcd.EndpointStatus
	health map[uint64]error
	// leader is the member ID the members agree on, 0 when none.
	leader uint64
}

// healthy reports whether member id answered a linearizable read and reported no alarm.
func (o *etcdObservation) healthy(id uint64) bool {
	err, ok := o.health[id]
	return ok && err == nil
}

// noSpace reports whether member id's only problem is a NOSPACE alarm: it has a leader and answered a
// linearizable read, but the cluster refuses writes.
func (o *etcdObservation) noSpace(id uint64) bool { return errors.Is(o.health[id], etcd.ErrNoSpace) }

// anyNoSpace reports whether a member that answered has a NOSPACE alarm: one is enough for every
// member to refuse writes.
func (o *etcdObservation) anyNoSpace() bool {
	for id := range o.health {
		if o.noSpace(id) {
			return true
		}
	}
	return false
}

// serving reports whether member id takes part in raft as a healthy member does: healthy, or healthy
// but for a NOSPACE alarm. Membership changes and restarts of other members need only that; a NOSPACE
// alarm must not block the rollout that raises the quota.
func (o *etcdObservation) serving(id uint64) bool { return o.healthy(id) || o.noSpace(id) }

// observe lists the cluster's pods and claims and asks the members' etcd what it knows. etcd being
// unreachable is an observation, not an error.
func (r *EtcdClusterReconciler) observe(ctx context.Context, s *scope) (ctrl.Result, error) {
	c := s.cluster
	// the selector of member pods and claims: backup Job pods carry the cluster label too
	sel := client.MatchingLabels(resources.SelectorLabels(c))
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(c.Namespace), sel); err != nil {
		return ctrl.Result{}, fmt.Errorf("list pods: %w", err)
	}
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := r.List(ctx, pvcs, client.InNamespace(c.Namespace), sel); err != nil {
		return ctrl.Result{}, fmt.Errorf("list persistentvolumeclaims: %w", err)
	}
	s.pods = map[string]*corev1.Pod{}
	for i := range pods.Items {
		if _, ok := resources.MemberOrdinal(c, pods.Items[i].Name); ok {
			s.pods[pods.Items[i].Name] = &pods.Items[i]
		}
	}
	s.pvcs = map[string]*corev1.PersistentVolumeClaim{}
	for i := range pvcs.Items {
		pvc := &pvcs.Items[i]
		if uid := pvc.Annotations[etcdv1alpha1.AnnotationClusterUID]; uid != "" && uid != string(c.UID) {
			// left by an earlier cluster of the same name (storage.retainPolicy Retain): never ours to use
			s.foreignPVCs = append(s.foreignPVCs, pvc.Name)
			continue
		}
		s.pvcs[pvc.Name] = pvc
	}
	s.etcd, s.etcdErr = r.observeEtcd(ctx, s)
	return ctrl.Result{}, nil
}

// endpoint is the client URL the operator dials for a member pod: its pod IP, so that the operator does
// not depend on cluster DNS.
func endpoint(p *corev1.Pod) string {
	if p == nil || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
		return ""
	}
	return "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(resources.ClientPort))
}

// observeEtcd reads the member list through any running member and the status and health of each
// member through its own endpoint, all in parallel and bounded by EtcdTimeout.
func (r *EtcdClusterReconciler) observeEtcd(ctx context.Context, s *scope) (*etcdObservation, error) {
	var endpoints []string
	for _, p := range s.pods {
		if p.Status.Phase == corev1.PodRunning {
			if ep := endpoint(p); ep != "" {
				endpoints = append(endpoints, ep)
			}
		}
	}
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("no member pod is running")
	}
	timeout := r.etcdTimeout()
	cli, err := r.EtcdClient(ctx, etcd.Config{Endpoints: endpoints, DialTimeout: timeout})
	if err != nil {
		return nil, fmt.Errorf("connect to etcd: %w", err)
	}
	s.etcdClient = cli // closed at the end of the pass

	listCtx, cancel := context.WithTimeout(ctx, timeout)
	clusterID, members, err := cli.MemberList(listCtx)
	cancel()
	if err != nil {
		return nil, err // already says "list members: ..."
	}
	obs := &etcdObservation{clusterID: clusterID, members: members,
		status: map[uint64]etcd.EndpointStatus{}, health: map[uint64]error{}}

	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range members {
		name := memberName(r.Options, s.cluster, m)
		ep := endpoint(s.pods[name])
		if ep == "" {
			obs.health[m.ID] = fmt.Errorf("member %s has no running pod", name)
			continue
		}
		wg.Add(1)
		go func(id uint64) {
			defer wg.Done()
			// Status is served locally: a member that does not answer it within statusTimeout is not
			// serving (a starting member accepts connections before it serves them).
			statusCtx, cancel := context.WithTimeout(ctx, min(timeout, statusTimeout))
			st, stErr := cli.Status(statusCtx, ep)
			cancel()
			hErr := stErr
			if stErr == nil && !st.IsLearner {
				// a learner serves no linearizable read: its answering Status is its health
				healthCtx, cancel := context.WithTimeout(ctx, timeout)
				hErr = cli.Health(healthCtx, ep)
				cancel()
			}
			mu.Lock()
			defer mu.Unlock()
			if stErr == nil {
				obs.status[id] = st
			}
			obs.health[id] = hErr
		}(m.ID)
	}
	wg.Wait()
	obs.leader = agreedLeader(obs.status)
	return obs, nil
}

// agreedLeader returns the leader ID most members report, 0 when none reports one.
func agreedLeader(status map[uint64]etcd.EndpointStatus) uint64 {
	votes := map[uint64]int{}
	var best uint64
	for _, st := range status {
		if st.Leader == 0 {
			continue
		}
		votes[st.Leader]++
		if votes[st.Leader] > votes[best] || (votes[st.Leader] == votes[best] && st.Leader < best) {
			best = st.Leader
		}
	}
	return best
}
