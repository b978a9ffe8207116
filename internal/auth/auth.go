// Package auth keeps the root credentials of etcd clusters with spec.auth: it finds the Secret that
// holds the root user's password (spec.auth.rootSecretRef, or "<cluster>-root-credentials", which it
// creates with a random password), and decides when the controller turns authentication on.
//
// The password is returned to the caller for etcd clients only: no error, event or status field this
// package makes holds it, and Credentials prints without it.
package auth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// passwordBytes is how many random bytes a generated password holds (256 bits); it is written
// base64url-encoded without padding, 43 characters that need no quoting in a shell or a URL.
const passwordBytes = 32

// ErrSecretUnusable is wrapped by Ensure's error when the cluster's root Secret cannot be used as is:
// a referenced Secret that is missing or has no password, or a Secret of the generated name that is
// not the cluster's. It needs a person; the error says what to change.
var ErrSecretUnusable = errors.New("the root password Secret cannot be used")

// Credentials are the root user's: the Secret they came from and the password.
type Credentials struct {
	// Secret is the name of the Secret in the cluster's namespace.
	Secret string
	// Password is the root user's password, as the Secret's key "password" holds it.
	Password string
}

// String names the Secret and never prints the password, so that a Credentials logged or formatted
// by mistake leaks nothing.
func (c Credentials) String() string { return "root credentials from Secret " + c.Secret }

// GoString is String, for %#v.
func (c Credentials) GoString() string { return c.String() }

// Config returns cfg with the credentials of user root set, when there are any.
func (c *Credentials) Config(cfg etcd.Config) etcd.Config {
	if c != nil && c.Password != "" {
		cfg.Username, cfg.Password = etcd.RootUser, c.Password
	}
	return cfg
}

// maxPasswordBytes is the longest password etcd can hash: bcrypt takes at most 72 bytes.
const maxPasswordBytes = 72

// Keeper reads and creates the root Secrets.
type Keeper struct {
	// Client creates the generated Secrets and reads them from the cache.
	Client client.Client
	// Reader reads a Secret that Client's cache does not hold: a Secret the user made
	// (rootSecretRef) carries none of the operator's labels, which select what its cache holds.
	Reader client.Reader
}

// Ensure returns cluster c's root credentials, nil when c's spec does not ask for authentication. With
// rootSecretRef it reads that Secret; without, it reads "<cluster>-root-credentials" and creates it
// with a random password (crypto/rand) when it is missing, reporting created. Errors wrap
// ErrSecretUnusable when the Secret needs a person (the message says what to do), and never hold the
// password.
func (k *Keeper) Ensure(ctx context.Context, c *etcdv1beta1.EtcdCluster) (creds *Credentials, created bool, err error) {
	if !c.Spec.AuthEnabled() {
		return nil, false, nil
	}
	name := resources.RootSecretName(c)
	s, err := k.get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name})
	generated := name == c.Name+resources.RootSecretSuffix
	switch {
	case err != nil:
		return nil, false, err
	case s == nil && !generated:
		return nil, false, fmt.Errorf("secret %s (spec.auth.rootSecretRef) not found: %w: create it in namespace %s with the root password under the key %q",
			name, ErrSecretUnusable, c.Namespace, resources.RootPasswordKey)
	case s == nil && c.Status.Auth != nil && c.Status.Auth.Enabled:
		// etcd keeps the password it was enabled with: a new one would lock the operator out for good
		return nil, false, fmt.Errorf("secret %s is gone but etcd authentication is on with the password it held: %w: "+
			"restore the Secret from a copy (a new password would be refused by etcd)", name, ErrSecretUnusable)
	case s == nil:
		return k.create(ctx, c)
	case generated && !metav1.IsControlledBy(s, c):
		return nil, false, fmt.Errorf("secret %s exists and is not this cluster's: %w: rename or delete it, or name it in spec.auth.rootSecretRef to use its password",
			name, ErrSecretUnusable)
	}
	pw := string(s.Data[resources.RootPasswordKey])
	switch {
	case pw == "":
		return nil, false, fmt.Errorf("secret %s has no key %q or it is empty: %w: put the root password there",
			name, resources.RootPasswordKey, ErrSecretUnusable)
	case len(pw) > maxPasswordBytes:
		return nil, false, fmt.Errorf("secret %s: the password under key %q is longer than %d bytes, which etcd's bcrypt cannot hash: %w: "+
			"use a shorter one", name, resources.RootPasswordKey, maxPasswordBytes, ErrSecretUnusable)
	case strings.TrimSpace(pw) != pw:
		return nil, false, fmt.Errorf("secret %s: the password under key %q starts or ends with white space (a file's trailing newline?), "+
			"which shells and etcdctl drop: %w: write it without (kubectl create secret generic --from-literal)", name, resources.RootPasswordKey, ErrSecretUnusable)
	}
	return &Credentials{Secret: name, Password: pw}, false, nil
}

// get reads Secret key through the cache, then the reader; nil when neither has it.
func (k *Keeper) get(ctx context.Context, key types.NamespacedName) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := k.Client.Get(ctx, key, s)
	if apierrors.IsNotFound(err) && k.Reader != nil {
		err = k.Reader.Get(ctx, key, s)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read secret %s: %w", key.Name, err)
	}
	return s, nil
}

// create creates the generated root Secret of c with a random password.
func (k *Keeper) create(ctx context.Context, c *etcdv1beta1.EtcdCluster) (*Credentials, bool, error) {
	b := make([]byte, passwordBytes)
	if _, err := rand.Read(b); err != nil {
		return nil, false, fmt.Errorf("generate root password: %w", err)
	}
	pw := base64.RawURLEncoding.EncodeToString(b)
	s := resources.RootSecret(c, []byte(pw))
	if err := k.Client.Create(ctx, s); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// created since the read (an earlier pass whose cache lags): read it next pass
			return nil, false, fmt.Errorf("create secret %s: it exists already; reading it again", s.Name)
		}
		return nil, false, fmt.Errorf("create secret %s: %w", s.Name, err)
	}
	return &Credentials{Secret: s.Name, Password: pw}, true, nil
}

// Blocked reports whether err (from Ensure) needs a person.
func Blocked(err error) bool { return errors.Is(err, ErrSecretUnusable) }

// Enable turns etcd authentication on through cli, as root with creds' password, when etcd says it is
// off, each call bounded by timeout, and records in obs what etcd said (obs.Enabled; left nil when etcd
// did not answer). Without creds (no spec.auth) or cli (no member answered) it does nothing. It returns
// the step it took, nil when authentication was on already, whoever turned it on. Call it only on a
// settled cluster (Available, every member a voter): a member that joins later gets the users from the
// raft log. The pass should end after the step, so that the next one dials with a token.
func Enable(ctx context.Context, cli etcd.Client, creds *Credentials, obs *verdict.AuthObservation, timeout time.Duration) (*verdict.Step, error) {
	if creds == nil || cli == nil || obs == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	on, err := cli.AuthStatus(ctx)
	if err != nil {
		return nil, err
	}
	obs.Enabled = &on
	if on {
		return nil, nil
	}
	if err := cli.EnableAuth(ctx, creds.Password); err != nil {
		return nil, err
	}
	*obs.Enabled = true
	return verdict.Acting(etcdv1beta1.ReasonEnablingAuth, fmt.Sprintf(
		"Enabled etcd authentication with user root (password in Secret %s); the operator's clients now authenticate", creds.Secret)), nil
}

// Refused returns the step of a pass whose etcd client could not authenticate because etcd refuses the
// password of creds (err wraps etcd.ErrAuthFailed); nil for any other err.
func Refused(err error, creds *Credentials) *verdict.Step {
	if creds == nil || !errors.Is(err, etcd.ErrAuthFailed) {
		return nil
	}
	return verdict.Blocked(etcdv1beta1.ReasonAuthFailed, fmt.Sprintf(
		"etcd refuses the root password in Secret %s: etcd's root password is another (the cluster may have been restored from a snapshot of a cluster with another password, "+
			"or the Secret was changed without `etcdctl user passwd root`); put etcd's root password back into the Secret, or point spec.auth.rootSecretRef at the Secret that holds it", creds.Secret))
}
