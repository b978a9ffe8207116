package etcd

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// RootUser is the etcd user the operator authenticates as, and RootRole the role that makes it an
// administrator. etcd has the role root built in (it cannot be added), and refuses to enable
// authentication until a user root holds it.
const (
	RootUser = "root"
	RootRole = "root"
)

// ErrAuthFailed is wrapped by New's error when etcd refuses the user name and password of Config
// (rpctypes.ErrGRPCAuthFailed, "authentication failed, invalid user ID or password"): authentication
// is on and the password is not the user's. The error never holds the password.
var ErrAuthFailed = errors.New("etcd refused the user name and password")

// AuthStatus reports whether authentication is enabled in the cluster (etcd's `auth status`). While
// it is off etcd answers any client; once on, only one with a user (a token, or the common name of its
// client certificate), else it fails with etcd's "user name is empty".
func (c *client) AuthStatus(ctx context.Context) (bool, error) {
	resp, err := c.cli.AuthStatus(ctx)
	if err != nil {
		return false, fmt.Errorf("auth status: %w", err)
	}
	return resp.Enabled, nil
}

// EnableAuth turns authentication on with user RootUser, password rootPassword, holding RootRole:
// it adds the user (a root that exists while authentication is off gets rootPassword), grants
// the role (granting it again does nothing) and enables authentication (enabling it again does
// nothing). Each step is idempotent, so a call that failed half-way is simply made again. It must be
// called while authentication is off: once on, adding the user and granting the role need the root
// user's own token. Errors never hold the password.
func (c *client) EnableAuth(ctx context.Context, rootPassword string) error {
	if on, err := c.AuthStatus(ctx); err == nil && on {
		return nil // on already: root's password is no longer the operator's to set
	}
	if _, err := c.cli.UserAdd(ctx, RootUser, rootPassword); isRPCError(err, rpctypes.ErrGRPCUserAlreadyExist) {
		// a root made before (by hand, or by an attempt with another password) gets this password, so
		// that the operator is not refused once authentication is on
		if _, err := c.cli.UserChangePassword(ctx, RootUser, rootPassword); err != nil {
			return fmt.Errorf("enable auth: set the password of the existing user %s: %w", RootUser, err)
		}
	} else if err != nil {
		return fmt.Errorf("enable auth: add user %s: %w", RootUser, err)
	}
	if _, err := c.cli.UserGrantRole(ctx, RootUser, RootRole); err != nil {
		return fmt.Errorf("enable auth: grant role %s to user %s: %w", RootRole, RootUser, err)
	}
	if _, err := c.cli.AuthEnable(ctx); err != nil {
		return fmt.Errorf("enable auth: %w", err)
	}
	return nil
}
