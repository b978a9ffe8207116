package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/metrics"
	"github.com/etcdkit/etcd-operator/internal/rollout"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// switchTLS takes the next step of a switch of spec.tls for the running cluster, on a settled cluster
// (every member pod serves TLS as model.DesiredTLS says, and every member is healthy): for the peer
// port, the update of one member's peer URL to the scheme the spec asks for, followers first and the
// leader last after moving leadership away, after which the rollout restarts the member to serve it;
// for the client port, waiting out the grace period during which every member serves both schemes. (A
// 1-member emptyDir cluster is not switched: admission refuses it, the rollout blocks and says why.)
func (r *EtcdClusterReconciler) switchTLS(ctx context.Context, s *scope) (*verdict.Step, error) {
	a := rollout.Next(s.m.PeerSwitch())
	switch a.Kind {
	case rollout.Wait:
		return verdict.Acting(etcdv1beta1.ReasonSwitchingTLS, "Switching TLS on the peer port: "+a.Reason), nil
	case rollout.MoveLeader:
		a.Reason = fmt.Sprintf("the leader %s is the last member whose peer port to switch", a.Member)
		return r.moveLeader(ctx, s, a)
	case rollout.Restart:
		url := r.Options.PeerURLScheme(s.cluster, a.Member, s.cluster.Spec.PeerTLS())
		callCtx, cancel := context.WithTimeout(ctx, r.etcdTimeout())
		defer cancel()
		if err := s.etcdClient.UpdatePeerURL(callCtx, a.ID, url); err != nil {
			return retryLater(s.cluster, "update_peer_url", err, "update the peer URL of "+a.Member)
		}
		metrics.CountMembership(s.cluster.Namespace, s.cluster.Name, "update_peer_url", nil, false)
		msg := fmt.Sprintf("Switching TLS on the peer port: the peer URL of %s is now %s; restarting it to serve it (%d of %d members left)",
			a.Member, url, a.Remaining-1, len(s.m.Listed()))
		r.event(s.cluster, corev1.EventTypeNormal, etcdv1beta1.ReasonSwitchingTLS, "UpdatePeerURL", "%s", msg)
		return verdict.Acting(etcdv1beta1.ReasonSwitchingTLS, msg), nil
	}
	return verdict.ClientTLSGrace(s.m), nil
}
