// Package observe asks a cluster's etcd members what they know, for the pass's model (package model):
// the member list through any running member, then each member's status and health through its own
// client URL, all in parallel and each call bounded by a timeout. A member that does not answer is an
// observation, not an error.
package observe

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// statusTimeout bounds a member's Status call, which it answers locally without raft.
const statusTimeout = time.Second

// notReadyStatusTimeout bounds the Status call of a member whose pod is not Ready: one that has started
// and does not serve yet (a new member can be that for 7 s, etcd-io/etcd#16436) accepts the connection
// and answers nothing, and every pass would wait statusTimeout on it; one that serves answers in
// milliseconds.
const notReadyStatusTimeout = 500 * time.Millisecond

// Endpoint is the client URL the operator dials for a member pod: its pod IP, so that the operator does
// not depend on cluster DNS, in the scheme its client port serves, https:// when it serves both (while
// TLS is being switched) and preferHTTPS is true; "" for a pod without an IP or being deleted.
func Endpoint(p *corev1.Pod, preferHTTPS bool) string {
	if p == nil || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
		return ""
	}
	scheme := "http://"
	if t := resources.PodTLSOf(p); t.ClientHTTPS && (preferHTTPS || !t.ClientHTTP) {
		scheme = "https://"
	}
	return scheme + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(resources.ClientPort))
}

// MemberEndpoint is the client URL the operator dials member mem of m at, of the scheme it dials every
// member with (see Etcd); empty when mem has no running pod with an IP.
func MemberEndpoint(m *model.Cluster, mem *model.Member) string {
	if mem == nil {
		return ""
	}
	return Endpoint(mem.Pod, preferHTTPS(m))
}

// preferHTTPS reports whether every member pod of m serves https:// on its client port: then the
// operator dials them all so (one client balances its calls over endpoints of one scheme only).
func preferHTTPS(m *model.Cluster) bool {
	for _, mem := range m.Pods() {
		if !resources.PodTLSOf(mem.Pod).ClientHTTPS {
			return false
		}
	}
	return true
}

// Etcd asks the members of m, whose pods the model holds, what etcd knows: the member list and the
// alarms through any running member, then each listed member's status and, for a voter, a linearizable read through its
// own pod, each call bounded by timeout, with base's TLS configuration and credentials (its endpoints
// and dial timeout are set here). It returns the answers and the client it used (the caller closes it),
// or why no member answered ("no member pod is running", or the connect or list error; a password etcd
// refuses wraps etcd.ErrAuthFailed).
func Etcd(ctx context.Context, connect etcd.Factory, m *model.Cluster, opts resources.Options, timeout time.Duration, base etcd.Config) (*model.Etcd, etcd.Client, error) {
	// the client balances its calls over the members whose pods are Ready (etcd's /readyz: serving)
	// when there are any: a member that has started but does not serve yet accepts connections and
	// answers none, and every call the client handed it would take its whole timeout (a new member
	// can be that for 7 s, etcd-io/etcd#16436); without a Ready pod, over every running one
	var endpoints, ready []string
	https := preferHTTPS(m)
	for _, mem := range m.Pods() {
		if mem.Pod.Status.Phase == corev1.PodRunning {
			if ep := Endpoint(mem.Pod, https); ep != "" {
				endpoints = append(endpoints, ep)
				if mem.PodReady() {
					ready = append(ready, ep)
				}
			}
		}
	}
	if len(endpoints) == 0 {
		return nil, nil, fmt.Errorf("no member pod is running")
	}
	var cli etcd.Client
	var clusterID uint64
	var members []etcd.Member
	var err error
	for _, eps := range [][]string{ready, endpoints} {
		if len(eps) == 0 || cli != nil && len(eps) == len(ready) {
			continue
		}
		if cli != nil { // the Ready members did not answer (readiness lags): every running one
			_ = cli.Close()
		}
		base.Endpoints, base.DialTimeout = eps, timeout
		if cli, err = connect(ctx, base); err != nil {
			return nil, nil, fmt.Errorf("connect to etcd: %w", err)
		}
		if clusterID, members, err = memberList(ctx, cli, len(eps), timeout); err == nil {
			break
		}
	}
	if err != nil {
		return nil, cli, err // already says "list members: ..."
	}
	obs := &model.Etcd{ClusterID: clusterID, Members: members,
		Status: map[uint64]etcd.EndpointStatus{}, Health: map[uint64]error{}}
	alarmCtx, cancel := context.WithTimeout(ctx, timeout)
	obs.Alarms, obs.AlarmsErr = cli.Alarms(alarmCtx)
	cancel()
	askMembers(ctx, cli, m, opts, timeout, obs)
	obs.Leader = AgreedLeader(obs.Status)
	return obs, cli, nil
}

// memberList lists the members through cli, whose n endpoints it takes in turn (the client balances
// calls round robin): a member cut off from its peers still accepts the call but cannot answer a
// linearizable list, and must not make the pass see no cluster at all. Each attempt but the last is
// bounded by statusTimeout (a list served by a member with a leader takes milliseconds), the last by
// timeout.
func memberList(ctx context.Context, cli etcd.Client, n int, timeout time.Duration) (uint64, []etcd.Member, error) {
	for i := 1; ; i++ {
		t := min(timeout, statusTimeout)
		if i >= n {
			t = timeout
		}
		listCtx, cancel := context.WithTimeout(ctx, t)
		clusterID, members, err := cli.MemberList(listCtx)
		cancel()
		if err == nil || i >= n || ctx.Err() != nil {
			return clusterID, members, err
		}
	}
}

// askMembers asks each member etcd lists, in parallel and through its own pod's client URL, for its
// status and, for a voter, a linearizable read, and records the answers in obs. An endpoint that
// answers as another member ID is not the member's: it is recorded as not answering, with why.
func askMembers(ctx context.Context, cli etcd.Client, m *model.Cluster, opts resources.Options, timeout time.Duration, obs *model.Etcd) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, em := range obs.Members {
		name := model.MemberName(opts, m.Object, em)
		var ep string
		within := statusTimeout
		settle := false
		if mem := m.Member(name); mem != nil {
			ep = Endpoint(mem.Pod, preferHTTPS(m))
			if since := mem.EtcdRunningSince(); mem.Pod != nil && !mem.PodReady() && (since.IsZero() || m.Now.Sub(since) < model.JoinGrace) {
				// a member whose etcd has run for longer is asked as long as a Ready one: it has had time
				// to publish itself, and a slow answer must not keep it from being marked serving
				// (the pod's readiness gate), and so from ever turning Ready
				within = notReadyStatusTimeout
			}
			// a member the status last recorded healthy that answers "no leader" is most likely seeing
			// leadership move; one that never served (starting, joining) is answered at once
			settle = mem.Recorded != nil && mem.Recorded.Healthy
		}
		if ep == "" {
			mu.Lock() // the members asked before write obs too
			obs.Health[em.ID] = fmt.Errorf("member %s has no running pod", name)
			mu.Unlock()
			continue
		}
		wg.Add(1)
		go func(id uint64, within time.Duration, settle bool) {
			defer wg.Done()
			st, stErr, hErr := ask(ctx, cli, ep, within, timeout, settle)
			if stErr == nil && st.MemberID != id {
				// the pod's address answers as another member (an address reused by another cluster, a pod
				// that started on another member's data): nothing it says is about this member
				stErr = fmt.Errorf("the endpoint %s of member %s answers as member %s", ep, name, etcd.FormatID(st.MemberID))
				hErr = stErr
			}
			mu.Lock()
			defer mu.Unlock()
			if stErr == nil {
				obs.Status[id] = st
			}
			obs.Health[id] = hErr
		}(em.ID, within, settle)
	}
	wg.Wait()
}

// ask asks one member for its status, bounded by statusWithin, and, for a voter, a linearizable read,
// bounded by timeout (asked again while leadership moves when settle is set: see health); the health
// error is the status error, or the read's.
func ask(ctx context.Context, cli etcd.Client, ep string, statusWithin, timeout time.Duration, settle bool) (etcd.EndpointStatus, error, error) {
	// Status is served locally: a member that does not answer it within statusWithin is not serving
	// (a starting member accepts connections before it serves them).
	statusCtx, cancel := context.WithTimeout(ctx, min(timeout, statusWithin))
	st, stErr := cli.Status(statusCtx, ep)
	cancel()
	if stErr != nil || st.IsLearner {
		// a learner serves no linearizable read: its answering Status is its health
		return st, stErr, stErr
	}
	hErr := health(ctx, cli, ep, timeout, settle)
	if settle && hErr == nil && st.Leader == 0 {
		// its status was read while leadership moved, and it has a leader now (it served the read):
		// without reading it again, no leader would be agreed on and the cluster would seem unavailable
		statusCtx, cancel := context.WithTimeout(ctx, min(timeout, statusWithin))
		if again, err := cli.Status(statusCtx, ep); err == nil {
			st = again
		}
		cancel()
	}
	return st, nil, hErr
}

// leaderSettle is how long a voter that answers as if its cluster had no leader (etcd.IsElecting) is
// asked again before it is reported so: etcd hands leadership over within a few heartbeats (as when
// the leader's pod is deleted: it hands over before it stops) and elects a leader within an election
// timeout (1 s by default). Without it, every deletion of a leader's pod made a pass see its peers
// down and report the quorum lost for a moment.
const leaderSettle = time.Second

// healthRetryEvery is how often such a voter is asked again.
const healthRetryEvery = 50 * time.Millisecond

// health runs the health check of the voter at ep (etcd.Client.Health), all attempts within timeout.
// With retry (a member the status last recorded healthy), a member that answers that an election or
// handover is under way is asked again for up to leaderSettle; so is one whose first attempt, bounded
// by two thirds of timeout, got no answer in time (etcd.IsUnanswered: a request forwarded to a leader
// that stepped down meanwhile is dropped unanswered). Without it, one attempt: a member that never
// served is not asked again, or passes would wait on every starting member (with many clusters
// starting at once, the workers are what every cluster waits for).
func health(ctx context.Context, cli etcd.Client, ep string, timeout time.Duration, retry bool) error {
	deadline := time.Now().Add(timeout)
	var settle time.Time // when asking again stops; zero until an attempt failed
	for {
		within := time.Until(deadline)
		if retry && settle.IsZero() {
			within = within * 2 / 3
		}
		attemptCtx, cancel := context.WithTimeout(ctx, within)
		err := cli.Health(attemptCtx, ep)
		unanswered := etcd.IsUnanswered(err) && ctx.Err() == nil
		cancel()
		if err == nil || !retry || !etcd.IsElecting(err) && !unanswered {
			return err
		}
		now := time.Now()
		if settle.IsZero() {
			settle = now.Add(leaderSettle)
		}
		if now.After(settle) || deadline.Sub(now) < 2*healthRetryEvery {
			return err
		}
		t := time.NewTimer(healthRetryEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// AgreedLeader returns the leader ID most members report, 0 when none reports one; a tie goes to the
// lower ID.
func AgreedLeader(status map[uint64]etcd.EndpointStatus) uint64 {
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
