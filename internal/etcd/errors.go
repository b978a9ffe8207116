package etcd

import (
	"context"
	"errors"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/status"
)

// Sentinel errors. Client methods wrap them together with the error etcd
// returned, so both errors.Is(err, ErrX) and the server's message survive.
var (
	// ErrLearnerNotReady is returned by PromoteLearner while the learner's
	// raft log has not caught up with the leader's (etcd requires the
	// learner's match index to be at least 90% of the leader's; see etcd's
	// runtime-configuration docs). It maps rpctypes.ErrGRPCLearnerNotReady,
	// "can only promote a learner member which is in sync with leader".
	// Retry after the learner has been started and has synced.
	ErrLearnerNotReady = errors.New("learner is not in sync with the leader")

	// ErrMemberNotFound is returned by PromoteLearner when no member has the
	// given ID (rpctypes.ErrGRPCMemberNotFound).
	ErrMemberNotFound = errors.New("member not found")

	// ErrTooManyLearners is returned by AddLearner when the cluster already
	// has as many learners as its --max-learners allows (default 1)
	// (rpctypes.ErrGRPCTooManyLearners).
	ErrTooManyLearners = errors.New("too many learners in the cluster")

	// ErrUnhealthyCluster is returned by AddLearner, PromoteLearner and
	// RemoveMember when etcd's --strict-reconfig-check refuses the change
	// because it could cost quorum (rpctypes.ErrGRPCUnhealthy,
	// rpctypes.ErrGRPCMemberNotEnoughStarted). etcd counts a peer as healthy
	// only once it has been connected for 5 s (etcdserver.HealthInterval),
	// so this is also what a freshly (re)started cluster answers; retry.
	ErrUnhealthyCluster = errors.New("cluster refused reconfiguration: not enough healthy members")

	// ErrNoLeader is returned when the members asked know of no raft leader
	// (an election is in progress or quorum is lost).
	ErrNoLeader = errors.New("no raft leader")

	// ErrIsLearner is returned by Health for a learner's endpoint: etcd
	// refuses linearizable reads and alarm lists on learners
	// (rpctypes.ErrGRPCNotSupportedForLearner), so a learner can never pass
	// the check. Use Status for learners.
	ErrIsLearner = errors.New("endpoint is a learner")

	// ErrAlarm is returned by Health when etcd has raised an alarm
	// (NOSPACE, CORRUPT) for the endpoint's member.
	ErrAlarm = errors.New("member has an active alarm")

	// ErrNoSpace is returned by Health, together with ErrAlarm, when the
	// member's only alarm is NOSPACE: its database reached the space quota
	// (--quota-backend-bytes), so the cluster refuses writes until the alarm
	// is disarmed, but the member has a leader and served a linearizable
	// read (per etcd's maintenance docs, "Space quota").
	ErrNoSpace = errors.New("NOSPACE alarm: the database reached its space quota")

	// ErrCorrupt is returned by Health, together with ErrAlarm, when etcd
	// raised the CORRUPT alarm for the member: its data diverged from its
	// peers' (a hash check failed). The whole cluster refuses writes until
	// the alarm is disarmed; etcd's guidance is to replace the member first
	// (per etcd's maintenance docs, "Data corruption").
	ErrCorrupt = errors.New("CORRUPT alarm: the member's data diverged from its peers'")
)

// isRPCError reports whether err, as returned by clientv3 (which converts
// gRPC statuses into rpctypes.EtcdError) or by a raw gRPC stub, is the etcd
// server error grpcErr (one of rpctypes.ErrGRPC*). Errors are matched by
// their message, the same way rpctypes.Error does.
func isRPCError(err, grpcErr error) bool {
	if err == nil {
		return false
	}
	want := rpctypes.ErrorDesc(grpcErr)
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Error() == want
	}
	if s, ok := status.FromError(err); ok {
		return s.Message() == want
	}
	return false
}

// IsElecting reports whether err says that the member asked had no leader to serve the request: an
// election or a leader's handover was under way (ErrNoLeader, etcd's "no leader", "leader changed",
// "request timed out, possibly due to previous leader failure" (a read whose proposal the old leader
// never committed), or a raft proposal dropped while leadership moved). Asked again a moment later, a member of a
// cluster with a quorum answers: etcd elects a leader within an election timeout (1 s by default) and
// hands leadership over within a few heartbeats.
func IsElecting(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrNoLeader) || isRPCError(err, rpctypes.ErrGRPCNoLeader) || isRPCError(err, rpctypes.ErrGRPCLeaderChanged) ||
		isRPCError(err, rpctypes.ErrGRPCTimeoutDueToLeaderFail) {
		return true
	}
	// etcdserver.ErrProposalDropped reaches clients as a gRPC status of code Unknown with its message
	return strings.Contains(err.Error(), "raft proposal dropped")
}

// IsUnanswered reports whether err says that a request got no answer within its deadline: the
// client's own deadline passed (context.DeadlineExceeded), or the member gave up first and answered
// "etcdserver: request timed out" (rpctypes.ErrGRPCTimeout; etcd bounds a request's raft proposal by
// the deadline the client sent with it, so a proposal forwarded to a leader that stepped down meanwhile
// and was dropped ends either way, whichever side notices first).
func IsUnanswered(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || isRPCError(err, rpctypes.ErrGRPCTimeout)
}
