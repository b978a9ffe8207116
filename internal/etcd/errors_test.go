package etcd

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestIsRPCError(t *testing.T) {
	ctx := context.Background()
	grpcErr := rpctypes.ErrGRPCLearnerNotReady
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"raw gRPC status", grpcErr, true},
		{"as clientv3 returns it", clientv3.ContextError(ctx, grpcErr), true},
		{"wrapped EtcdError", fmt.Errorf("x: %w", rpctypes.ErrMemberLearnerNotReady), true},
		{"other etcd error", rpctypes.ErrGRPCMemberNotLearner, false},
		{"other clientv3 error", clientv3.ContextError(ctx, rpctypes.ErrGRPCMemberNotFound), false},
		{"plain error", errors.New(rpctypes.ErrorDesc(grpcErr) + "!"), false},
		{"nil", nil, false},
	} {
		if got := isRPCError(tc.err, grpcErr); got != tc.want {
			t.Errorf("%s: isRPCError(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
	if !isUnhealthy(clientv3.ContextError(ctx, rpctypes.ErrGRPCUnhealthy)) ||
		!isUnhealthy(clientv3.ContextError(ctx, rpctypes.ErrGRPCMemberNotEnoughStarted)) ||
		isUnhealthy(clientv3.ContextError(ctx, rpctypes.ErrGRPCNoLeader)) {
		t.Error("isUnhealthy misclassifies")
	}
}

func TestSamePeerURL(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"http://etcd-1.example:2380", "http://etcd-1.example:2380", true},
		{"HTTP://Etcd-0.example:2380", "http://etcd-0.example:2380", true},
		{"http://etcd-1.example:2380", "https://etcd-1.example:2380", false},
		{"http://etcd-1.example:2380", "http://etcd-1.example:2381", false},
		{"not a url", "not a url", true},
	} {
		if got := samePeerURL(tc.a, tc.b); got != tc.want {
			t.Errorf("samePeerURL(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestIsElecting: the errors a member returns while leadership moves are elections, as the client
// sees them (rpctypes.Error of the gRPC status); other errors are not.
func TestIsElecting(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("health: %w", rpctypes.Error(rpctypes.ErrGRPCNoLeader)), true},
		{fmt.Errorf("health: %w", rpctypes.Error(rpctypes.ErrGRPCLeaderChanged)), true},
		{fmt.Errorf("list alarms: %w", rpctypes.Error(rpctypes.ErrGRPCTimeoutDueToLeaderFail)), true},
		{errors.New("rpc error: code = Unknown desc = raft proposal dropped"), true},
		{fmt.Errorf("status: %w", ErrNoLeader), true},
		{rpctypes.Error(rpctypes.ErrGRPCTimeoutDueToConnectionLost), false},
		{context.DeadlineExceeded, false},
		{nil, false},
	} {
		if got := IsElecting(tc.err); got != tc.want {
			t.Errorf("IsElecting(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestIsUnanswered: a request that ran out of time, on the client's side or the member's, is
// unanswered; an answer that names another cause is not.
func TestIsUnanswered(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("health: %w", context.DeadlineExceeded), true},
		{fmt.Errorf("list alarms: %w", rpctypes.Error(rpctypes.ErrGRPCTimeout)), true},
		{status.Error(codes.Unavailable, rpctypes.ErrorDesc(rpctypes.ErrGRPCTimeout)), true},
		{rpctypes.Error(rpctypes.ErrGRPCTimeoutDueToConnectionLost), false},
		{rpctypes.Error(rpctypes.ErrGRPCNoLeader), false},
		{context.Canceled, false},
		{nil, false},
	} {
		if got := IsUnanswered(tc.err); got != tc.want {
			t.Errorf("IsUnanswered(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
