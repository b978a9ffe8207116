package backup

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcd-operator/internal/testenv"
)

// TestS3StoreTLS: a server whose certificate a private CA issued is refused as untrusted with the
// system's CAs only, and with another CA; trusting its CA (CACertPEM) the store keeps its contract.
func TestS3StoreTLS(t *testing.T) {
	srv := testenv.StartS3TLS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := S3Config{Endpoint: srv.Endpoint, Bucket: srv.Bucket, Region: srv.Region, ForcePathStyle: true,
		AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey}

	for name, ca := range map[string][]byte{"the system's CAs": nil, "another CA": testenv.NewCA(t).CertPEM} {
		c := cfg
		c.CACertPEM = ca
		s, err := NewS3Store(c)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Put(ctx, "ns/c/b.db", strings.NewReader("data"), 4, PutOptions{})
		if !errors.Is(err, ErrUntrustedCertificate) || !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "x509") {
			t.Errorf("put trusting %s: %v, want ErrUntrustedCertificate (and ErrUnreachable) from x509", name, err)
		}
		if ca != nil {
			continue // each refused call takes minio-go's retries: one is enough
		}
		if _, err := s.Get(ctx, "ns/c/b.db"); !errors.Is(err, ErrUntrustedCertificate) {
			t.Errorf("get trusting %s: %v, want ErrUntrustedCertificate", name, err)
		}
	}

	cfg.CACertPEM = srv.CACertPEM
	s, err := NewS3Store(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testStoreContract(t, s)
}
