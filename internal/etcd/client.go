// Package etcd is the narrow wrapper over the etcd v3 client (clientv3) that
// the operator uses to inspect and reconfigure the etcd clusters it runs:
// member list, learner add/promote, member removal, per-endpoint status and
// health, and leadership transfer.
//
// Every call takes a context and returns when it is done; callers are
// expected to pass contexts with deadlines. A call against an endpoint that
// cannot be reached blocks until that deadline (clientv3 waits for a
// connection to become ready) and then fails with an error wrapping the
// context's error. Nothing in this package sleeps or retries beyond what
// clientv3 does within the caller's deadline.
package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// DefaultDialTimeout is the dial timeout New uses when Config.DialTimeout is
// zero.
const DefaultDialTimeout = 5 * time.Second

// healthKey is the key Health reads, the one `etcdctl endpoint health` uses.
const healthKey = "health"

// Member is one etcd cluster member as the member list reports it.
type Member struct {
	// ID is the member's raft ID; FormatID renders it as etcdctl does.
	ID uint64
	// Name is the member's --name. It is empty for a member that was added
	// but whose process has not yet started and published itself.
	Name string
	// PeerURLs are the member's advertised peer URLs.
	PeerURLs []string
	// ClientURLs are the member's advertised client URLs; empty until the
	// member has started.
	ClientURLs []string
	// IsLearner is true for a non-voting learner.
	IsLearner bool
}

// EndpointStatus is what one member reports about itself through the
// maintenance Status RPC.
type EndpointStatus struct {
	// Endpoint is the client URL that was asked.
	Endpoint string
	// MemberID is the ID of the member serving Endpoint.
	MemberID uint64
	// Leader is the ID of the raft leader this member knows of; 0 if none.
	Leader uint64
	// RaftTerm is the member's current raft term.
	RaftTerm uint64
	// RaftIndex is the member's raft committed index.
	RaftIndex uint64
	// RaftAppliedIndex is the member's applied index.
	RaftAppliedIndex uint64
	// Version is the etcd server version, e.g. "3.6.16".
	Version string
	// DBSizeBytes is the physically allocated size of the backend database,
	// in bytes.
	DBSizeBytes int64
	// DBSizeInUseBytes is the logically used part of the backend database,
	// in bytes; DBSizeBytes-DBSizeInUseBytes is reclaimable by defragment.
	DBSizeInUseBytes int64
	// IsLearner is true if the member is a learner.
	IsLearner bool
	// Revision is the newest revision of the member's key-value store.
	Revision int64
	// Errors are the member's reported problems, e.g. "etcdserver: no
	// leader" or one entry per active alarm ("memberID:… alarm:NOSPACE").
	Errors []string
}

// IsLeader reports whether the member that answered is the raft leader.
func (s EndpointStatus) IsLeader() bool {
	return s.Leader != 0 && s.Leader == s.MemberID
}

// Config says how to reach a cluster.
type Config struct {
	// Endpoints are client URLs ("https://host:2379"); at least one.
	Endpoints []string
	// DialTimeout bounds connection set-up and authentication in New;
	// zero means DefaultDialTimeout.
	DialTimeout time.Duration
	// TLS is the client TLS configuration; nil for plain-text endpoints.
	TLS *tls.Config
	// Username and Password enable etcd authentication when both are set.
	Username, Password string
}

// Client is the set of etcd calls the operator makes. Implementations are
// safe for concurrent use.
type Client interface {
	// MemberList returns the cluster ID and all members, voters and
	// learners. The read is linearizable: the answering member confirms
	// with the leader first, so it fails (at ctx's deadline at the latest)
	// when the cluster has no quorum. Learners refuse it; clientv3 then
	// retries on another configured endpoint, so only a client whose sole
	// endpoint is a learner fails.
	MemberList(ctx context.Context) (clusterID uint64, members []Member, err error)

	// AddLearner adds a learner with the given peer URL and returns it and
	// the member list after the change. It is idempotent: if a member with
	// that peer URL already exists (e.g. an earlier add timed out on the
	// caller's side but was applied), that member is returned, whatever its
	// IsLearner, and nothing is added; the list is read before the add and
	// again after a failed one. Errors wrap ErrTooManyLearners or
	// ErrUnhealthyCluster where etcd gave those reasons.
	AddLearner(ctx context.Context, peerURL string) (added Member, members []Member, err error)

	// PromoteLearner makes learner id a voter. It returns nil if id is
	// already a voter (checked with a linearizable member list before, and
	// after a failed promotion), an error wrapping ErrLearnerNotReady while the
	// learner is not in sync with the leader (always the case while its
	// process is not running), ErrMemberNotFound if there is no such
	// member and ErrUnhealthyCluster when strict reconfig check refuses.
	PromoteLearner(ctx context.Context, id uint64) error

	// RemoveMember removes member id. It returns nil when the member is
	// already gone: etcd answered rpctypes.ErrGRPCMemberNotFound, or the
	// call failed otherwise but a linearizable member list no longer shows
	// id. It returns an error wrapping ErrUnhealthyCluster when removing a
	// present member could cost quorum.
	RemoveMember(ctx context.Context, id uint64) error

	// UpdatePeerURL makes peerURL the only peer URL of member id, like
	// `etcdctl member update` (a raft request: it needs quorum). The
	// member's peers dial it at the new URL from then on; the member
	// itself keeps listening where its flags say until it restarts.
	// Updating to the URL the member already has changes nothing.
	UpdatePeerURL(ctx context.Context, id uint64, peerURL string) error

	// Status asks exactly endpoint (dialled on its own, whether or not it
	// is in Config.Endpoints) for its maintenance status.
	Status(ctx context.Context, endpoint string) (EndpointStatus, error)

	// Health checks endpoint like `etcdctl endpoint health`: the member
	// has a leader, a linearizable read through it succeeds within ctx,
	// and etcd has no alarm raised for that member. It returns nil or an
	// error saying why not, wrapping ErrNoLeader, ErrIsLearner, ErrAlarm
	// (and ErrNoSpace when NOSPACE is the member's only alarm) or the
	// transport/context error. Unlike etcdctl, alarms raised for
	// other members do not make this endpoint unhealthy.
	Health(ctx context.Context, endpoint string) error

	// DisarmNoSpace clears the NOSPACE alarm of member id, like `etcdctl
	// alarm disarm`, through any configured endpoint (it is a raft request:
	// it needs quorum). Disarming an alarm that is not raised does nothing.
	// etcd raises it again on the next write that does not fit the quota.
	DisarmNoSpace(ctx context.Context, id uint64) error

	// Alarms returns the alarms etcd has raised, cluster-wide: those of
	// members that were removed since included (they stay until disarmed).
	Alarms(ctx context.Context) ([]Alarm, error)

	// DisarmCorrupt clears the CORRUPT alarm of member id (a raft request:
	// it needs quorum). Disarming an alarm that is not raised does nothing.
	DisarmCorrupt(ctx context.Context, id uint64) error

	// MoveLeader transfers raft leadership to voter toID and returns once
	// the old leader sees toID as leader. etcd only accepts the request on
	// the current leader, so MoveLeader first finds the leader by asking
	// every configured endpoint for its Status, then sends the request to
	// the leader's endpoint. It returns nil at once if toID already leads.
	MoveLeader(ctx context.Context, toID uint64) error

	// Defragment defragments the database of exactly endpoint's member, like `etcdctl defrag`: etcd
	// rewrites the file without its free pages. The member serves no request meanwhile (seconds per GiB
	// of database), so ctx must allow for that. Its peers are not affected.
	Defragment(ctx context.Context, endpoint string) error

	// HashKV asks exactly endpoint for the hash of its key-value store up
	// to revision rev (0: its newest), like `etcdctl endpoint hashkv`.
	// Members that hashed the same revision with the same compact revision
	// hold the same data exactly when their hashes are equal (etcd's own
	// corruption check compares them the same way). It fails with etcd's
	// "future revision" error when the member has not applied rev yet and
	// "compacted" when rev is below its compact revision.
	HashKV(ctx context.Context, endpoint string, rev int64) (KVHash, error)

	// AuthStatus reports whether etcd authentication is enabled. Once it is, etcd answers only
	// clients with a user (Config's credentials, or a client certificate's common name).
	AuthStatus(ctx context.Context) (bool, error)

	// EnableAuth adds user root with rootPassword (an existing root keeps its own password), grants
	// it the role root and enables authentication; each step is idempotent. Call it while
	// authentication is off. A Client with credentials created while it was off authenticates on its
	// next call that etcd refuses for want of a user.
	EnableAuth(ctx context.Context, rootPassword string) error

	// Close releases the client's connections.
	Close() error
}

// KVHash is one member's hash of its key-value store.
type KVHash struct {
	// Endpoint is the client URL that was asked; MemberID the member that answered.
	Endpoint string
	MemberID uint64
	// Hash is the crc32 of the keys and values up to HashRevision.
	Hash uint32
	// HashRevision is the revision hashed; CompactRevision the member's compact revision then.
	HashRevision, CompactRevision int64
}

// Factory creates a Client. The controller holds a Factory so tests can
// inject fakes; New is the real one.
type Factory func(ctx context.Context, cfg Config) (Client, error)

var _ Factory = New

// client implements Client over a clientv3.Client.
type client struct {
	cli       *clientv3.Client
	endpoints []string
}

// New creates a Client over clientv3 with cfg's endpoints, TLS and
// credentials, cfg.DialTimeout (DefaultDialTimeout if zero), no endpoint
// auto-sync or discovery (the endpoint list stays exactly cfg.Endpoints) and
// a no-op logger. clientv3 connects lazily, so New does not fail because an
// endpoint is down; it blocks only to authenticate when credentials are
// set (up to the dial timeout), and returns ctx's error if ctx ends first.
// With credentials: a client of a cluster whose authentication is off works
// without a token; a password etcd refuses fails with an error wrapping
// ErrAuthFailed; when authentication cannot be done (etcd authenticates with
// a linearizable read: it needs a quorum) the client goes on without a
// token, and calls that need the user fail with etcd's permission error.
func New(ctx context.Context, cfg Config) (Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("create etcd client: no endpoints")
	}
	dialTimeout := cfg.DialTimeout
	if dialTimeout <= 0 {
		dialTimeout = DefaultDialTimeout
	}
	endpoints := slices.Clone(cfg.Endpoints)
	ccfg := clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          dialTimeout,
		DialKeepAliveTime:    30 * time.Second,
		DialKeepAliveTimeout: 10 * time.Second,
		TLS:                  cfg.TLS,
		Username:             cfg.Username,
		Password:             cfg.Password,
		AutoSyncInterval:     0,
		RejectOldCluster:     false,
		Logger:               zap.NewNop(),
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("create etcd client for %v: %w", endpoints, err)
	}
	cli, err := dial(ctx, ccfg)
	switch {
	case err == nil:
		return &client{cli: cli, endpoints: endpoints}, nil
	case isRPCError(err, rpctypes.ErrGRPCAuthFailed):
		return nil, fmt.Errorf("create etcd client for %v as user %s: %w: %w", endpoints, cfg.Username, ErrAuthFailed, err)
	case cfg.Username != "" && ctx.Err() == nil:
		// etcd authenticates with a linearizable read, which needs a quorum: without one, go on
		// without a token, so that what etcd serves without one (a member's Status, to a client
		// whose certificate names it) still answers; calls that need the user fail on their own.
		ccfg.Username, ccfg.Password = "", ""
		if cli, ferr := dial(ctx, ccfg); ferr == nil {
			return &client{cli: cli, endpoints: endpoints}, nil
		}
	}
	return nil, fmt.Errorf("create etcd client for %v: %w", endpoints, err)
}

// dial runs clientv3.New, which authenticates when ccfg has credentials, and returns ctx's error if ctx
// ends first (a client created after that is closed).
func dial(ctx context.Context, ccfg clientv3.Config) (*clientv3.Client, error) {
	type result struct {
		cli *clientv3.Client
		err error
	}
	done := make(chan result, 1)
	go func() {
		cli, err := clientv3.New(ccfg)
		done <- result{cli, err}
	}()
	select {
	case r := <-done:
		return r.cli, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.cli != nil {
				_ = r.cli.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// Close implements Client.
func (c *client) Close() error {
	if err := c.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("close etcd client: %w", err)
	}
	return nil
}

// MemberList implements Client.
func (c *client) MemberList(ctx context.Context) (uint64, []Member, error) {
	resp, err := c.cli.MemberList(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("list members: %w", err)
	}
	return clusterID(resp.Header), toMembers(resp.Members), nil
}

// AddLearner implements Client.
func (c *client) AddLearner(ctx context.Context, peerURL string) (Member, []Member, error) {
	_, members, err := c.MemberList(ctx)
	if err != nil {
		return Member{}, nil, fmt.Errorf("add learner %s: %w", peerURL, err)
	}
	if m, ok := findByPeerURL(members, peerURL); ok {
		return m, members, nil
	}

	resp, err := c.cli.MemberAddAsLearner(ctx, []string{peerURL})
	switch {
	case err == nil:
		return toMember(resp.Member), toMembers(resp.Members), nil
	case isRPCError(err, rpctypes.ErrGRPCTooManyLearners):
		return Member{}, nil, fmt.Errorf("add learner %s: %w: %w", peerURL, ErrTooManyLearners, err)
	case isUnhealthy(err):
		return Member{}, nil, fmt.Errorf("add learner %s: %w: %w", peerURL, ErrUnhealthyCluster, err)
	}
	// The add may have been applied anyway (peer URL added concurrently
	// since our list, or the answer was lost): look again.
	if _, members, lerr := c.MemberList(ctx); lerr == nil {
		if m, ok := findByPeerURL(members, peerURL); ok {
			return m, members, nil
		}
	}
	return Member{}, nil, fmt.Errorf("add learner %s: %w", peerURL, err)
}

// PromoteLearner implements Client.
func (c *client) PromoteLearner(ctx context.Context, id uint64) error {
	_, members, err := c.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("promote learner %s: %w", FormatID(id), err)
	}
	i := slices.IndexFunc(members, func(m Member) bool { return m.ID == id })
	if i < 0 {
		return fmt.Errorf("promote learner %s: %w", FormatID(id), ErrMemberNotFound)
	}
	if !members[i].IsLearner {
		return nil
	}

	_, err = c.cli.MemberPromote(ctx, id)
	switch {
	case err == nil, isRPCError(err, rpctypes.ErrGRPCMemberNotLearner):
		// Promoted, possibly by a concurrent or replayed request.
		return nil
	case isRPCError(err, rpctypes.ErrGRPCLearnerNotReady):
		return fmt.Errorf("promote learner %s: %w: %w", FormatID(id), ErrLearnerNotReady, err)
	case isRPCError(err, rpctypes.ErrGRPCMemberNotFound):
		return fmt.Errorf("promote learner %s: %w: %w", FormatID(id), ErrMemberNotFound, err)
	case isUnhealthy(err):
		return fmt.Errorf("promote learner %s: %w: %w", FormatID(id), ErrUnhealthyCluster, err)
	}
	// The promotion may have been applied anyway (e.g. the answering
	// member stopped or the answer was lost): look again.
	if _, members, lerr := c.MemberList(ctx); lerr == nil {
		if i := slices.IndexFunc(members, func(m Member) bool { return m.ID == id }); i >= 0 && !members[i].IsLearner {
			return nil
		}
	}
	return fmt.Errorf("promote learner %s: %w", FormatID(id), err)
}

// RemoveMember implements Client.
func (c *client) RemoveMember(ctx context.Context, id uint64) error {
	_, err := c.cli.MemberRemove(ctx, id)
	if err == nil || isRPCError(err, rpctypes.ErrGRPCMemberNotFound) {
		return nil
	}
	// etcd does not always say "member not found" for a member that is
	// gone: its strict reconfig check runs first and may answer "unhealthy
	// cluster", and a member serving its own removal answers "server
	// stopped" once the removal is applied. Decide by the member list.
	if _, members, lerr := c.MemberList(ctx); lerr == nil &&
		!slices.ContainsFunc(members, func(m Member) bool { return m.ID == id }) {
		return nil
	}
	if isUnhealthy(err) {
		return fmt.Errorf("remove member %s: %w: %w", FormatID(id), ErrUnhealthyCluster, err)
	}
	return fmt.Errorf("remove member %s: %w", FormatID(id), err)
}

// UpdatePeerURL implements Client.
func (c *client) UpdatePeerURL(ctx context.Context, id uint64, peerURL string) error {
	if _, err := c.cli.MemberUpdate(ctx, id, []string{peerURL}); err != nil {
		return fmt.Errorf("update the peer URL of member %s to %s: %w", FormatID(id), peerURL, err)
	}
	return nil
}

// Status implements Client.
func (c *client) Status(ctx context.Context, endpoint string) (EndpointStatus, error) {
	resp, err := c.cli.Status(ctx, endpoint)
	if err != nil {
		return EndpointStatus{}, fmt.Errorf("status of %s: %w", endpoint, err)
	}
	return toStatus(endpoint, resp), nil
}

// Health implements Client.
func (c *client) Health(ctx context.Context, endpoint string) error {
	conn, err := c.cli.Dial(endpoint)
	if err != nil {
		return fmt.Errorf("health of %s: dial: %w", endpoint, err)
	}
	defer conn.Close()
	maint := clientv3.NewMaintenanceFromMaintenanceClient(pb.NewMaintenanceClient(conn), c.cli)
	kv := clientv3.NewKVFromKVClient(pb.NewKVClient(conn), c.cli)

	// Status first: it is served locally, so it tells a learner (which
	// refuses the checks below) and a member without a leader (where the
	// read would hang until the deadline) apart quickly.
	sresp, err := maint.Status(ctx, endpoint)
	if err != nil {
		return fmt.Errorf("health of %s: status: %w", endpoint, err)
	}
	st := toStatus(endpoint, sresp)
	if st.IsLearner {
		return fmt.Errorf("health of %s: member %s: %w", endpoint, FormatID(st.MemberID), ErrIsLearner)
	}
	if st.Leader == 0 {
		return fmt.Errorf("health of %s: member %s: %w", endpoint, FormatID(st.MemberID), ErrNoLeader)
	}

	// A linearizable read needs the leader to confirm it still leads a
	// quorum. Permission denied still proves that (etcdctl counts it as
	// healthy too).
	if _, err := kv.Get(ctx, healthKey); err != nil && !isRPCError(err, rpctypes.ErrGRPCPermissionDenied) {
		return fmt.Errorf("health of %s: linearizable read: %w", endpoint, err)
	}

	aresp, err := maint.AlarmList(ctx)
	if err != nil {
		return fmt.Errorf("health of %s: list alarms: %w", endpoint, err)
	}
	var alarms []string
	for _, a := range aresp.Alarms {
		if a.MemberID == st.MemberID && a.Alarm != pb.AlarmType_NONE {
			alarms = append(alarms, a.Alarm.String())
		}
	}
	if slices.Contains(alarms, pb.AlarmType_CORRUPT.String()) {
		return fmt.Errorf("health of %s: member %s: %w: %w", endpoint, FormatID(st.MemberID), ErrAlarm, ErrCorrupt)
	}
	if len(alarms) > 0 && !slices.ContainsFunc(alarms, func(a string) bool { return a != pb.AlarmType_NOSPACE.String() }) {
		return fmt.Errorf("health of %s: member %s: %w: %w", endpoint, FormatID(st.MemberID), ErrAlarm, ErrNoSpace)
	}
	if len(alarms) > 0 {
		return fmt.Errorf("health of %s: member %s: %w: %s", endpoint, FormatID(st.MemberID), ErrAlarm, strings.Join(alarms, ","))
	}
	return nil
}

// DisarmNoSpace implements Client.
func (c *client) DisarmNoSpace(ctx context.Context, id uint64) error {
	_, err := c.cli.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: id, Alarm: pb.AlarmType_NOSPACE})
	if err != nil {
		return fmt.Errorf("disarm NOSPACE of member %s: %w", FormatID(id), err)
	}
	return nil
}

// Alarm is one alarm etcd raised.
type Alarm struct {
	// MemberID is the member the alarm is for.
	MemberID uint64
	// Type is the alarm: AlarmNoSpace or AlarmCorrupt.
	Type string
}

// The alarms etcd raises, as Alarm.Type names them.
const (
	AlarmNoSpace = "NOSPACE"
	AlarmCorrupt = "CORRUPT"
)

// Alarms implements Client.
func (c *client) Alarms(ctx context.Context) ([]Alarm, error) {
	resp, err := c.cli.AlarmList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list alarms: %w", err)
	}
	out := make([]Alarm, 0, len(resp.Alarms))
	for _, a := range resp.Alarms {
		if a.Alarm != pb.AlarmType_NONE {
			out = append(out, Alarm{MemberID: a.MemberID, Type: a.Alarm.String()})
		}
	}
	return out, nil
}

// DisarmCorrupt implements Client.
func (c *client) DisarmCorrupt(ctx context.Context, id uint64) error {
	if _, err := c.cli.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: id, Alarm: pb.AlarmType_CORRUPT}); err != nil {
		return fmt.Errorf("disarm CORRUPT of member %s: %w", FormatID(id), err)
	}
	return nil
}

// MoveLeader implements Client.
func (c *client) MoveLeader(ctx context.Context, toID uint64) error {
	leaderID, leaderEndpoint, err := c.findLeader(ctx)
	if err != nil {
		return fmt.Errorf("move leader to %s: %w", FormatID(toID), err)
	}
	if leaderID == toID {
		return nil
	}
	conn, err := c.cli.Dial(leaderEndpoint)
	if err != nil {
		return fmt.Errorf("move leader from %s to %s: dial %s: %w", FormatID(leaderID), FormatID(toID), leaderEndpoint, err)
	}
	defer conn.Close()
	maint := clientv3.NewMaintenanceFromMaintenanceClient(pb.NewMaintenanceClient(conn), c.cli)
	if _, err := maint.MoveLeader(ctx, toID); err != nil {
		return fmt.Errorf("move leader from %s (%s) to %s: %w", FormatID(leaderID), leaderEndpoint, FormatID(toID), err)
	}
	return nil
}

// findLeader asks every configured endpoint for its Status concurrently and
// returns the leader's ID and an endpoint that reaches it. It returns as soon
// as the leader itself answers. If no configured endpoint is the leader, it
// waits for all answers (an unreachable endpoint answers at ctx's deadline)
// and then uses the leader's advertised client URL from the member list.
func (c *client) findLeader(ctx context.Context) (uint64, string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	type answer struct {
		st  EndpointStatus
		err error
	}
	answers := make(chan answer, len(c.endpoints))
	for _, ep := range c.endpoints {
		go func() {
			st, err := c.Status(ctx, ep)
			answers <- answer{st, err}
		}()
	}
	var (
		leaderID uint64
		errs     []error
	)
	for range c.endpoints {
		a := <-answers
		switch {
		case a.err != nil:
			errs = append(errs, a.err)
		case a.st.IsLeader():
			return a.st.Leader, a.st.Endpoint, nil
		case a.st.Leader != 0:
			leaderID = a.st.Leader
		}
	}
	if leaderID == 0 {
		return 0, "", fmt.Errorf("find leader: %w", errors.Join(append([]error{ErrNoLeader}, errs...)...))
	}
	if err := ctx.Err(); err != nil {
		return 0, "", fmt.Errorf("find leader: leader is %s but no configured endpoint reaches it: %w", FormatID(leaderID), err)
	}
	_, members, err := c.MemberList(ctx)
	if err != nil {
		return 0, "", fmt.Errorf("find leader %s: %w", FormatID(leaderID), err)
	}
	for _, m := range members {
		if m.ID == leaderID && len(m.ClientURLs) > 0 {
			return leaderID, m.ClientURLs[0], nil
		}
	}
	return 0, "", fmt.Errorf("find leader: leader %s has no client URL in the member list", FormatID(leaderID))
}

// isUnhealthy reports whether err is etcd's strict-reconfig-check refusal.
func isUnhealthy(err error) bool {
	return isRPCError(err, rpctypes.ErrGRPCUnhealthy) || isRPCError(err, rpctypes.ErrGRPCMemberNotEnoughStarted)
}

// findByPeerURL returns the member advertising peerURL, compared by scheme
// and host case-insensitively.
func findByPeerURL(members []Member, peerURL string) (Member, bool) {
	for _, m := range members {
		for _, u := range m.PeerURLs {
			if samePeerURL(u, peerURL) {
				return m, true
			}
		}
	}
	return Member{}, false
}

// samePeerURL reports whether a and b name the same peer endpoint.
func samePeerURL(a, b string) bool {
	ua, errA := url.Parse(a)
	ub, errB := url.Parse(b)
	if errA != nil || errB != nil || ua.Host == "" || ub.Host == "" {
		return a == b
	}
	return strings.EqualFold(ua.Scheme, ub.Scheme) && strings.EqualFold(ua.Host, ub.Host)
}

// clusterID returns the cluster ID from a response header, 0 if absent.
func clusterID(h *pb.ResponseHeader) uint64 {
	if h == nil {
		return 0
	}
	return h.ClusterId
}

// toMember converts etcd's member message.
func toMember(m *pb.Member) Member {
	if m == nil {
		return Member{}
	}
	return Member{
		ID:         m.ID,
		Name:       m.Name,
		PeerURLs:   slices.Clone(m.PeerURLs),
		ClientURLs: slices.Clone(m.ClientURLs),
		IsLearner:  m.IsLearner,
	}
}

// toMembers converts a member list, keeping etcd's order.
func toMembers(ms []*pb.Member) []Member {
	out := make([]Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, toMember(m))
	}
	return out
}

// toStatus converts a maintenance Status response.
func toStatus(endpoint string, r *clientv3.StatusResponse) EndpointStatus {
	st := EndpointStatus{
		Endpoint:         endpoint,
		Leader:           r.Leader,
		RaftTerm:         r.RaftTerm,
		RaftIndex:        r.RaftIndex,
		RaftAppliedIndex: r.RaftAppliedIndex,
		Version:          r.Version,
		DBSizeBytes:      r.DbSize,
		DBSizeInUseBytes: r.DbSizeInUse,
		IsLearner:        r.IsLearner,
		Errors:           slices.Clone(r.Errors),
	}
	if r.Header != nil {
		st.MemberID = r.Header.MemberId
		st.Revision = r.Header.Revision
	}
	return st
}

// Defragment implements Client.
func (c *client) Defragment(ctx context.Context, endpoint string) error {
	if _, err := c.cli.Defragment(ctx, endpoint); err != nil {
		return fmt.Errorf("defragment %s: %w", endpoint, err)
	}
	return nil
}

// HashKV implements Client.
func (c *client) HashKV(ctx context.Context, endpoint string, rev int64) (KVHash, error) {
	resp, err := c.cli.HashKV(ctx, endpoint, rev)
	if err != nil {
		return KVHash{}, fmt.Errorf("hashkv of %s at revision %d: %w", endpoint, rev, err)
	}
	h := KVHash{Endpoint: endpoint, Hash: resp.Hash, CompactRevision: resp.CompactRevision, HashRevision: resp.HashRevision}
	if resp.Header != nil {
		h.MemberID = resp.Header.MemberId
	}
	return h, nil
}
