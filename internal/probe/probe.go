// Package probe watches etcd members between reconcile passes. Every Interval (default 1 s) it asks
// each member pod for its status, over one long-lived gRPC connection per member, and when what a
// member answers changes (it stops or starts answering, loses or changes its leader, becomes a voter,
// reports an alarm) it sends an event for that member's pod, which the EtcdCluster controller maps to
// its cluster. So a member that freezes, crashes or is cut off from its peers is seen within about a
// second plus etcd's election timeout (a member cut off from its peers reports no leader once that
// elapses), instead of at the next periodic health check. It makes no API writes and no etcd writes:
// one Status call per member per interval, which etcd answers locally.
package probe

import (
	"context"
	"crypto/tls"
	"net"
	"strconv"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// Defaults of Prober.
const (
	// DefaultInterval is how often each member is asked for its status.
	DefaultInterval = time.Second
	// DefaultTimeout bounds each Status call: a member that has not answered by then counts as not
	// answering (Status is served locally, in milliseconds, by a member that runs).
	DefaultTimeout = time.Second
	// maxInFlight bounds the Status calls of one round that run at once.
	maxInFlight = 32
	// connBufferSize is the read and write buffer size of each member's connection, in bytes: a
	// Status request and response take a few hundred.
	connBufferSize = 4 << 10
)

// Target is one member to watch: the host:port of its client URL, the TLS configuration to dial it with
// (nil: plain text), and the object an event about it carries (a member pod, whose labels name its
// cluster).
type Target struct {
	Endpoint string
	TLS      *tls.Config
	Object   client.Object
	// Healthy is true when the member's cluster status records it healthy (status.members[].healthy).
	// A member so recorded that does not answer is news even when it never answered the prober (a
	// member frozen moments after its pod was recreated: the prober's connection may not have reached
	// it yet when a pass saw it healthy).
	Healthy bool
}

// Prober asks every target for its status each Interval and sends an event on Events when a target's
// answer differs from its previous one. It is a controller-runtime Runnable: add it to the manager
// (it runs on the leader only) and watch Events with source.Channel.
type Prober struct {
	// Targets lists the members to watch, once per round; an error skips the round.
	Targets func(ctx context.Context) ([]Target, error)
	// Interval and Timeout: see DefaultInterval and DefaultTimeout (zero: the default).
	Interval, Timeout time.Duration

	events chan event.GenericEvent
	conns  map[string]conn
	last   map[string]observed
}

// observed is what a round saw of a target: its answer, and whether its cluster's status recorded it
// healthy then.
type observed struct {
	answer
	recordedHealthy bool
}

// conn is a connection to one endpoint and the TLS configuration it was dialled with.
type conn struct {
	cc  *grpc.ClientConn
	tls *tls.Config
}

// answer is what changes of a member's status matter to the operator.
type answer struct {
	answered       bool
	member, leader uint64
	learner        bool
	errors         int
}

// New returns a Prober of the members targets lists.
func New(targets func(ctx context.Context) ([]Target, error)) *Prober {
	return &Prober{Targets: targets, events: make(chan event.GenericEvent, 1024),
		conns: map[string]conn{}, last: map[string]observed{}}
}

// Events is the channel of events about members whose answer changed.
func (p *Prober) Events() <-chan event.GenericEvent { return p.events }

// Start runs rounds every Interval until ctx ends, then closes its connections.
func (p *Prober) Start(ctx context.Context) error {
	interval := p.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	defer p.closeAll()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			p.Round(ctx)
		}
	}
}

// Round asks every target once and sends an event for each whose answer changed since the previous
// round (a target seen for the first time sends none: its pod's creation already woke its cluster),
// and for each that does not answer while its cluster's status records it healthy, once until either
// changes.
func (p *Prober) Round(ctx context.Context) {
	targets, err := p.Targets(ctx)
	if err != nil {
		return
	}
	answers := make([]answer, len(targets))
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxInFlight)
	for i, tg := range targets {
		conn := p.conn(tg.Endpoint, tg.TLS) // the map is the round's own: not touched by the calls
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			answers[i] = p.ask(ctx, conn)
		}()
	}
	wg.Wait()
	seen := map[string]observed{}
	for i, tg := range targets {
		cur := observed{answer: answers[i], recordedHealthy: tg.Healthy}
		seen[tg.Endpoint] = cur
		prev, ok := p.last[tg.Endpoint]
		changed := ok && prev.answer != cur.answer
		// recorded healthy but not answering: sent once, not again while the previous round saw the same
		wasUnreached := ok && prev.recordedHealthy && !prev.answered
		unreached := cur.recordedHealthy && !cur.answered && !wasUnreached
		if changed || unreached {
			select {
			case p.events <- event.GenericEvent{Object: tg.Object}:
			case <-ctx.Done():
				return
			}
		}
	}
	for ep, conn := range p.conns {
		if _, ok := seen[ep]; !ok {
			_ = conn.cc.Close()
			delete(p.conns, ep)
		}
	}
	p.last = seen
}

// conn returns the connection to endpoint, created on first use or when its TLS configuration changed
// (gRPC connects lazily and reconnects by itself).
func (p *Prober) conn(endpoint string, cfg *tls.Config) *grpc.ClientConn {
	if c, ok := p.conns[endpoint]; ok {
		if c.tls == cfg {
			return c.cc
		}
		_ = c.cc.Close()
		delete(p.conns, endpoint)
	}
	creds := insecure.NewCredentials()
	if cfg != nil {
		creds = credentials.NewTLS(cfg)
	}
	c, err := grpc.NewClient("passthrough:///"+endpoint, grpc.WithTransportCredentials(creds),
		// one small Status call a second: gRPC's default 32 KiB read and write buffers per connection
		// were most of the operator's memory per cluster (one connection per member)
		grpc.WithReadBufferSize(connBufferSize), grpc.WithWriteBufferSize(connBufferSize))
	if err != nil {
		return nil // only a malformed target fails here: it counts as not answering
	}
	p.conns[endpoint] = conn{cc: c, tls: cfg}
	return c
}

// ask asks one member for its status.
func (p *Prober) ask(ctx context.Context, conn *grpc.ClientConn) answer {
	if conn == nil {
		return answer{}
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := pb.NewMaintenanceClient(conn).Status(ctx, &pb.StatusRequest{})
	if err != nil {
		return answer{}
	}
	a := answer{answered: true, leader: resp.Leader, learner: resp.IsLearner, errors: len(resp.Errors)}
	if resp.Header != nil {
		a.member = resp.Header.MemberId
	}
	return a
}

func (p *Prober) closeAll() {
	for ep, c := range p.conns {
		_ = c.cc.Close()
		delete(p.conns, ep)
	}
}

// MemberPods returns the Targets function that lists the member pods reader holds (those with a
// cluster and a member label) that run and have an IP, at their client port. A pod that serves TLS
// there is dialled with clientTLS of its cluster, and left out while that is nil (its cluster has not
// been reconciled yet).
func MemberPods(reader client.Reader, clientTLS func(namespace, cluster string) *tls.Config) func(ctx context.Context) ([]Target, error) {
	return func(ctx context.Context) ([]Target, error) {
		pods := &corev1.PodList{}
		if err := reader.List(ctx, pods, client.HasLabels{etcdv1beta1.LabelCluster, etcdv1beta1.LabelMember}); err != nil {
			return nil, err
		}
		clusters := &etcdv1beta1.EtcdClusterList{}
		if err := reader.List(ctx, clusters); err != nil {
			return nil, err
		}
		healthy := map[string]bool{} // "namespace/cluster/member" of the members recorded healthy
		for _, c := range clusters.Items {
			for _, m := range c.Status.Members {
				if m.Healthy {
					healthy[c.Namespace+"/"+c.Name+"/"+m.Name] = true
				}
			}
		}
		var out []Target
		for i := range pods.Items {
			pod := &pods.Items[i]
			if pod.Status.PodIP == "" || pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
				continue
			}
			tg := Target{Endpoint: net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(resources.ClientPort)), Object: pod,
				Healthy: healthy[pod.Namespace+"/"+pod.Labels[etcdv1beta1.LabelCluster]+"/"+pod.Name]}
			if resources.ServesClientTLS(pod) {
				if tg.TLS = clientTLS(pod.Namespace, pod.Labels[etcdv1beta1.LabelCluster]); tg.TLS == nil {
					continue
				}
			}
			out = append(out, tg)
		}
		return out, nil
	}
}
