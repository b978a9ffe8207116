package etcd

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

const testRootPassword = "Zq3-root-password-for-tests"

// newAuthClient creates a Client for endpoints that authenticates as root with password.
func newAuthClient(t *testing.T, password string, endpoints ...string) (Client, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := New(ctx, Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Username: RootUser, Password: password})
	if err == nil {
		t.Cleanup(func() { _ = cli.Close() })
	}
	return cli, err
}

// TestEnableAuth: EnableAuth turns authentication on (AuthStatus says so) and is idempotent; then a
// client with root's password may do what the operator does (member list, alarms, hashes), a client
// without it may not, a wrong password fails with ErrAuthFailed without the password in the error,
// and a root client created before every member restarted (their simple tokens are gone) works again.
func TestEnableAuth(t *testing.T) {
	c := newTestCluster(t, 3)
	plain := newClient(t, c.endpoints()...)
	if on, err := plain.AuthStatus(callCtx(t)); err != nil || on {
		t.Fatalf("AuthStatus before = %v, %v; want off", on, err)
	}
	// credentials work against a cluster whose authentication is still off
	early, err := newAuthClient(t, testRootPassword, c.endpoints()...)
	if err != nil {
		t.Fatalf("New with credentials while auth is off: %v", err)
	}
	if _, _, err := early.MemberList(callCtx(t)); err != nil {
		t.Fatalf("MemberList with credentials while auth is off: %v", err)
	}
	if err := plain.EnableAuth(callCtx(t), testRootPassword); err != nil {
		t.Fatalf("EnableAuth: %v", err)
	}
	if _, err := plain.AuthStatus(callCtx(t)); err == nil {
		t.Error("AuthStatus without a user succeeded with authentication on")
	}
	root, err := newAuthClient(t, testRootPassword, c.endpoints()...)
	if err != nil {
		t.Fatalf("New as root: %v", err)
	}
	if on, err := root.AuthStatus(callCtx(t)); err != nil || !on {
		t.Fatalf("AuthStatus after = %v, %v; want on", on, err)
	}
	// a client with credentials created while authentication was off authenticates once it is on
	if _, err := early.HashKV(callCtx(t), c.members[0].clientURL, 0); err != nil {
		t.Errorf("HashKV through the client created before auth was on: %v", err)
	}
	if err := root.EnableAuth(callCtx(t), "another-password"); err != nil {
		t.Errorf("EnableAuth again, as root: %v", err)
	}
	if _, err := newAuthClient(t, testRootPassword, c.endpoints()...); err != nil {
		t.Errorf("EnableAuth again changed root's password: %v", err)
	}
	checkRoot := func(ctx context.Context) error {
		if _, _, err := root.MemberList(ctx); err != nil {
			return err
		}
		if _, err := root.Alarms(ctx); err != nil {
			return err
		}
		_, err := root.HashKV(ctx, c.members[0].clientURL, 0)
		return err
	}
	if err := checkRoot(callCtx(t)); err != nil {
		t.Fatalf("as root: %v", err)
	}
	if _, err := plain.HashKV(callCtx(t), c.members[0].clientURL, 0); err == nil {
		t.Error("HashKV without a user succeeded with authentication on")
	}
	if _, _, err := plain.AddLearner(callCtx(t), "http://127.0.0.1:1"); err == nil {
		t.Error("AddLearner without a user succeeded with authentication on")
	}

	_, err = newAuthClient(t, "wrong-password-xyz", c.endpoints()...)
	if !errors.Is(err, ErrAuthFailed) {
		t.Errorf("New with a wrong password: %v, want ErrAuthFailed", err)
	}
	if err != nil && strings.Contains(err.Error(), "wrong-password-xyz") {
		t.Errorf("the error holds the password: %v", err)
	}

	// Every member restarts: the simple tokens they held are gone; the client authenticates again.
	c.stopAll()
	var initial []string
	for _, m := range c.members {
		initial = append(initial, m.name+"="+m.peerURL)
	}
	for _, m := range c.members {
		c.start(m, embed.ClusterStateFlagExisting, strings.Join(initial, ","))
	}
	for _, m := range c.members {
		c.waitReady(m)
	}
	poll.Eventually(t, reconfigTimeout, "root client works after every member restarted", checkRoot)
}

// TestEnableAuthSetsExistingRootsPassword: a root user made before (by hand, or by an attempt with
// another password) gets the operator's password when authentication is turned on, so that the
// operator is not refused once it is on.
func TestEnableAuthSetsExistingRootsPassword(t *testing.T) {
	c := newTestCluster(t, 1)
	plain := newClient(t, c.endpoints()...)
	raw, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = raw.Close() }()
	if _, err := raw.UserAdd(callCtx(t), RootUser, "made-by-hand"); err != nil {
		t.Fatal(err)
	}
	if err := plain.EnableAuth(callCtx(t), testRootPassword); err != nil {
		t.Fatalf("EnableAuth with root made before: %v", err)
	}
	root, err := newAuthClient(t, testRootPassword, c.endpoints()...)
	if err != nil {
		t.Fatalf("New as root with the operator's password: %v", err)
	}
	if on, err := root.AuthStatus(callCtx(t)); err != nil || !on {
		t.Fatalf("AuthStatus = %v, %v; want on", on, err)
	}
}
