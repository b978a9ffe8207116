package controller

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/model"
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

// observe lists the cluster's pods and claims and asks the members' etcd what it knows, and joins it
// all into the pass's model. etcd being unreachable is an observation, not an error.
func (r *EtcdClusterReconciler) observe(ctx context.Context, s *scope) (*step, error) {
	c := s.cluster
	// the selector of member pods and claims: backup Job pods carry the cluster label too
	sel := client.MatchingLabels(resources.SelectorLabels(c))
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(c.Namespace), sel); err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := r.List(ctx, pvcs, client.InNamespace(c.Namespace), sel); err != nil {
		return nil, fmt.Errorf("list persistentvolumeclaims: %w", err)
	}
	in := model.Input{Cluster: c, Options: r.Options, Pods: pods.Items, Claims: pvcs.Items}
	s.m = model.Build(in) // what Kubernetes holds: which pods to ask
	in.Etcd, in.EtcdErr = r.observeEtcd(ctx, s)
	s.m = model.Build(in)
	return nil, nil
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
func (r *EtcdClusterReconciler) observeEtcd(ctx context.Context, s *scope) (*model.Etcd, error) {
	var endpoints []string
	for _, m := range s.m.Pods() {
		if m.Pod.Status.Phase == corev1.PodRunning {
			if ep := endpoint(m.Pod); ep != "" {
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
	obs := &model.Etcd{ClusterID: clusterID, Members: members,
		Status: map[uint64]etcd.EndpointStatus{}, Health: map[uint64]error{}}

	r.askMembers(ctx, cli, s.m, obs)
	obs.Leader = agreedLeader(obs.Status)
	return obs, nil
}

// askMembers asks each member etcd lists, in parallel and through its own pod's client URL, for its
// status and, for a voter, a linearizable read, and records the answers in obs.
func (r *EtcdClusterReconciler) askMembers(ctx context.Context, cli etcd.Client, m *model.Cluster, obs *model.Etcd) {
	timeout := r.etcdTimeout()
	members := obs.Members
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, em := range members {
		name := model.MemberName(r.Options, m.Object, em)
		var ep string
		if mm := m.Member(name); mm != nil {
			ep = endpoint(mm.Pod)
		}
		if ep == "" {
			mu.Lock() // the members asked before write obs too
			obs.Health[em.ID] = fmt.Errorf("member %s has no running pod", name)
			mu.Unlock()
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
				obs.Status[id] = st
			}
			obs.Health[id] = hErr
		}(em.ID)
	}
	wg.Wait()
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
