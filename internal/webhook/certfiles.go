package webhook

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The keys of the serving certificate and its private key, in the Secret and as file names.
const (
	certKey = corev1.TLSCertKey       // tls.crt
	keyKey  = corev1.TLSPrivateKeyKey // tls.key
)

// certFiles is a manager.Runnable that keeps tls.crt and tls.key in dir equal to those of one Secret.
// The rotator only writes the Secret; rather than wait for kubelet to refresh a Secret volume (up to a
// minute or more), the operator writes the files itself, into a memory-backed emptyDir, as soon as the
// Secret changes, and the webhook server reloads them. The CA's key never leaves the Secret.
type certFiles struct {
	cache  cache.Cache
	secret types.NamespacedName
	dir    string
}

// newCertFiles returns a certFiles whose cache watches only the Secret named secret.
func newCertFiles(mgr ctrl.Manager, secret types.NamespacedName, dir string) (*certFiles, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:            mgr.GetScheme(),
		Mapper:            mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{secret.Namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Field: fields.OneTermEqualSelector("metadata.name", secret.Name)},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("create the cache of Secret %s: %w", secret, err)
	}
	return &certFiles{cache: c, secret: secret, dir: dir}, nil
}

// Start writes the files whenever the Secret is added or changes, until ctx is done.
func (f *certFiles) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("webhook-certs").WithValues("secret", f.secret, "dir", f.dir)
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		return fmt.Errorf("create the webhook certificate directory: %w", err)
	}
	inf, err := f.cache.GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		return fmt.Errorf("watch Secret %s: %w", f.secret, err)
	}
	write := func(obj any) {
		s, ok := obj.(*corev1.Secret)
		if !ok || s.Name != f.secret.Name {
			return
		}
		changed, err := f.write(s)
		switch {
		case err != nil:
			log.Error(err, "Cannot write the webhook serving certificate")
		case changed:
			log.Info("Wrote the webhook serving certificate")
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    write,
		UpdateFunc: func(_, obj any) { write(obj) },
	}); err != nil {
		return fmt.Errorf("watch Secret %s: %w", f.secret, err)
	}
	return f.cache.Start(ctx)
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every replica serves webhooks.
func (*certFiles) NeedLeaderElection() bool { return false }

// write writes the Secret's certificate and key when both are set and differ from the files, the key
// first: the webhook server reloads on each file event and keeps its current certificate while the
// pair does not match. It reports whether it wrote anything.
func (f *certFiles) write(s *corev1.Secret) (bool, error) {
	crt, key := s.Data[certKey], s.Data[keyKey]
	if len(crt) == 0 || len(key) == 0 {
		return false, nil // not generated yet
	}
	wroteKey, err := writeFile(filepath.Join(f.dir, keyKey), key)
	if err != nil {
		return false, err
	}
	wroteCert, err := writeFile(filepath.Join(f.dir, certKey), crt)
	return wroteKey || wroteCert, err
}

// writeFile replaces path with data (mode 0600) through a rename, unless it holds data already. It
// reports whether it wrote.
func writeFile(path string, data []byte) (bool, error) {
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) {
		return false, nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close() //nolint:errcheck // the write error is the one to report
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return false, err
	}
	return true, nil
}
