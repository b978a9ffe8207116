package certs

import (
	"testing"
	"time"

	"github.com/etcdkit/etcd-operator/internal/pki"
)

// TestCheckIssuedRemembers: the keeper checks a leaf certificate's signature, key and names once per
// certificate, key, CA and request, and checks again when any of them changes; what it refused it
// refuses again.
func TestCheckIssuedRemembers(t *testing.T) {
	now := time.Now()
	ca, err := pki.NewCA("ca", pki.CAValidity, now)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("other", pki.CAValidity, now)
	if err != nil {
		t.Fatal(err)
	}
	req := pki.Request{CommonName: "demo-server", DNSNames: []string{"demo-client.ns.svc"}, Server: true}
	certPEM, keyPEM, err := ca.Issue(req, now)
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, err := ca.Issue(req, now)
	if err != nil {
		t.Fatal(err)
	}
	k := &Keeper{}
	first, err := k.checkIssued(ca, certPEM, keyPEM, req)
	if err != nil {
		t.Fatalf("a certificate the CA issued for req is refused: %v", err)
	}
	again, err := k.checkIssued(ca, certPEM, keyPEM, req)
	if err != nil || again != first {
		t.Errorf("checked again = %p, %v; want the certificate remembered (%p)", again, err, first)
	}
	for name, check := range map[string]func() error{
		"another key": func() error { _, err := k.checkIssued(ca, certPEM, otherKey, req); return err },
		"another CA":  func() error { _, err := k.checkIssued(other, certPEM, keyPEM, req); return err },
		"another request": func() error {
			r := req
			r.DNSNames = []string{"x"}
			_, err := k.checkIssued(ca, certPEM, keyPEM, r)
			return err
		},
	} {
		for range 2 {
			if err := check(); err == nil {
				t.Errorf("%s: accepted", name)
			}
		}
	}
	if len(k.issued) != 1 {
		t.Errorf("the keeper remembers %d checks; want 1 (refusals are not remembered)", len(k.issued))
	}
}
