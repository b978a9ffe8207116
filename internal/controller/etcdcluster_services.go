package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/certs"
	"github.com/etcdkit/etcd-operator/internal/ownedcache"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// reconcileServices creates the peer and client Services when they are missing, and blocks while a
// Service of their name is not the cluster's.
func (r *EtcdClusterReconciler) reconcileServices(ctx context.Context, s *scope) (*verdict.Step, error) {
	var created []string
	for _, want := range []*corev1.Service{resources.BuildPeerService(s.cluster), resources.BuildClientService(s.cluster)} {
		got := &corev1.Service{}
		err := r.Get(ctx, client.ObjectKeyFromObject(want), got, ownedcache.OwnedOnly)
		if apierrors.IsNotFound(err) {
			if err = r.Create(ctx, want); err == nil {
				created = append(created, want.Name)
				continue
			}
			if apierrors.IsAlreadyExists(err) {
				// one the cache does not hold: read it (a refused name is read from the API server)
				err = r.Get(ctx, client.ObjectKeyFromObject(want), got, ownedcache.OwnedOnly)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("service %s: %w", want.Name, err)
		}
		if !metav1.IsControlledBy(got, s.cluster) {
			return verdict.Blocked(etcdv1beta1.ReasonForeignObject,
				fmt.Sprintf("Service %s exists and is not owned by this EtcdCluster: delete it, or give the cluster another name", want.Name)), nil
		}
	}
	if len(created) > 0 {
		// one event: two of the same reason and action would be merged into one series, showing one name
		r.event(s.cluster, corev1.EventTypeNormal, "CreatedServices", "Create", "Created Services %s", strings.Join(created, ", "))
	}
	return nil, nil
}

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;create;update
// +kubebuilder:rbac:groups=cert-manager.io,resources=issuers;clusterissuers,verbs=get

// certificateRetry is how soon a pass looks again at a cluster whose cert-manager Certificate is not Ready.
const certificateRetry = 10 * time.Second

// reconcileTLS keeps the cluster's CA and certificates current (package certs) before any member pod
// mounts them, for the ports the spec or any member pod uses TLS on (certs.PortsOf), with one event
// naming the Secrets created or issued again (issuedEvent); it blocks while a Secret of their name is
// not the cluster's.
func (r *EtcdClusterReconciler) reconcileTLS(ctx context.Context, s *scope) (*verdict.Step, error) {
	// the member pods, which observe goes on with (backup Job pods carry the cluster label too)
	if err := r.List(ctx, &s.pods, client.InNamespace(s.cluster.Namespace), client.MatchingLabels(resources.SelectorLabels(s.cluster))); err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	ports := certs.PortsOf(s.cluster, s.pods.Items)
	res, err := r.Certs.EnsureFor(ctx, s.cluster, ports)
	s.certs, s.report.TLS, s.report.NoTLS = res, res.Observation(time.Now()), ports == certs.Ports{}
	verdict.ApplyTrustedCAs(s.cluster, s.report.TLS)
	r.issuedEvent(s.cluster, res.Changed)
	if errors.Is(err, certs.ErrCertificateIssuing) {
		return verdict.Acting(etcdv1beta1.ReasonWaitingForCertificates, "Waiting for cert-manager: "+err.Error()), nil
	}
	if reason, blocked := certs.Blocked(err); blocked {
		st := verdict.Blocked(reason, err.Error())
		if reason == etcdv1beta1.ReasonCertificateNotReady {
			st.After = certificateRetry // cert-manager retries on its own, without an event here
		}
		return st, nil
	}
	return nil, err
}

// maxEventNote is the longest note an event may carry (events.k8s.io/v1 refuses longer ones).
const maxEventNote = 1024

// issuedEvent records one IssuedCertificate event for the Secrets a pass created or issued again:
// about the Secret when there is one, and naming each when there are several (a new cluster's four),
// one API write instead of one each.
func (r *EtcdClusterReconciler) issuedEvent(c *etcdv1beta1.EtcdCluster, changed []certs.Changed) {
	switch len(changed) {
	case 0:
		return
	case 1:
		ch := changed[0]
		r.eventAbout(c, objectRef(c, "v1", "Secret", ch.Secret), corev1.EventTypeNormal, "IssuedCertificate", "Issue", "Secret %s: %s", ch.Secret, ch.Reason)
		return
	}
	// each Secret gets an equal share of the note, so that every name is in it
	share := maxEventNote/len(changed) - len("; ")
	parts := make([]string, 0, len(changed))
	for _, ch := range changed {
		parts = append(parts, verdict.Truncate(fmt.Sprintf("Secret %s: %s", ch.Secret, ch.Reason), share))
	}
	r.event(c, corev1.EventTypeNormal, "IssuedCertificate", "Issue", "%s", strings.Join(parts, "; "))
}

// rotateCA takes the next step of a CA rotation, or starts one that is due (certs.AdvanceRotation), on
// a settled cluster: every member rolled onto the current spec and healthy.
func (r *EtcdClusterReconciler) rotateCA(ctx context.Context, s *scope) (*verdict.Step, error) {
	ch, wait, err := r.Certs.AdvanceRotation(ctx, s.cluster, s.certs, s.m.PodIPs())
	if ch != nil {
		r.eventAbout(s.cluster, objectRef(s.cluster, "v1", "Secret", ch.Secret), corev1.EventTypeNormal, etcdv1beta1.ReasonRotatingCA, "Rotate", "Secret %s: %s", ch.Secret, ch.Reason)
		wait = ch.Reason
	}
	return verdict.RotatingCA(wait, ch == nil), err
}
