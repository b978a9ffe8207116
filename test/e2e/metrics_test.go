//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"net/http"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The operator serves its metrics over HTTPS (port 8443, a self-signed certificate) to clients whose
// token may GET /metrics: the tests scrape as a ServiceAccount bound to the metrics-reader ClusterRole,
// as Prometheus would.
const (
	metricsPort          = "8443"
	metricsReaderNS      = "default"
	metricsReaderName    = "e2e-metrics-reader"
	metricsReaderRole    = "etcd-operator-metrics-reader"
	metricsTokenLifetime = time.Hour
)

var metricsToken struct {
	sync.Mutex
	token            string
	created, expires time.Time
}

// metricsClient trusts the operator's self-signed metrics certificate without checking it.
var metricsClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the operator's generated, self-signed certificate
}}

// scrapeOperator GETs /metrics of the operator pod at ip with a metrics reader's token. For up to a
// minute after the reader was created it asks again while it is refused: the API server's RBAC may not
// know the binding yet, and the operator caches a denial for 30 s.
func scrapeOperator(ctx context.Context, ip string) (*http.Response, error) {
	token, created, err := metricsReaderToken(ctx)
	if err != nil {
		return nil, err
	}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+ip+":"+metricsPort+"/metrics", nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := metricsClient.Do(req)
		refused := err == nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden)
		if !refused || time.Since(created) > time.Minute {
			return resp, err
		}
		_ = resp.Body.Close()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// metricsReaderToken returns a token of the ServiceAccount metricsReaderName, bound to the
// metrics-reader ClusterRole, creating both the first time (created is when), and a new token once
// the last one is close to expiring.
func metricsReaderToken(ctx context.Context) (token string, created time.Time, err error) {
	metricsToken.Lock()
	defer metricsToken.Unlock()
	if metricsToken.token != "" && time.Until(metricsToken.expires) > 5*time.Minute {
		return metricsToken.token, metricsToken.created, nil
	}
	if metricsToken.created.IsZero() {
		metricsToken.created = time.Now()
	}
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: metricsReaderName, Namespace: metricsReaderNS}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: metricsReaderName},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReaderRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: metricsReaderName, Namespace: metricsReaderNS}},
		},
	} {
		if err := k8s.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", time.Time{}, err
		}
	}
	tr, err := kube.CoreV1().ServiceAccounts(metricsReaderNS).CreateToken(ctx, metricsReaderName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(metricsTokenLifetime / time.Second))},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", time.Time{}, err
	}
	metricsToken.token, metricsToken.expires = tr.Status.Token, tr.Status.ExpirationTimestamp.Time
	return metricsToken.token, metricsToken.created, nil
}
