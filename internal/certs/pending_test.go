package certs

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestCertificatePending: what a Certificate's conditions (as cert-manager v1.21 writes them) say of
// its Secret: Ready for its generation is done; a failed issuance blocks, naming cert-manager's
// message; anything else (no status yet, not Ready before issuing starts, issuing) is waited for.
func TestCertificatePending(t *testing.T) {
	cond := func(typ, status, reason, msg string, gen int64) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg, "observedGeneration": gen}
	}
	for _, tc := range []struct {
		name     string
		status   map[string]any
		want     error
		contains string
	}{
		{"ready", map[string]any{"conditions": []any{cond("Ready", "True", "Ready", "up to date", 2)}}, nil, ""},
		{"ready for an older spec", map[string]any{"conditions": []any{cond("Ready", "True", "Ready", "up to date", 1)}}, ErrCertificateIssuing, "up to date"},
		{"no status", nil, ErrCertificateIssuing, "check that it runs"},
		{"not ready before issuing starts", map[string]any{"conditions": []any{cond("Ready", "False", "DoesNotExist", "Issuing certificate as Secret does not exist", 2)}},
			ErrCertificateIssuing, "DoesNotExist"},
		{"issuing", map[string]any{"conditions": []any{cond("Ready", "False", "DoesNotExist", "x", 2), cond("Issuing", "True", "DoesNotExist", "Issuing certificate", 2)}},
			ErrCertificateIssuing, "Issuing certificate"},
		{"failed", map[string]any{"lastFailureTime": "2026-12-02T10:00:00Z", "conditions": []any{cond("Ready", "False", "DoesNotExist", "x", 2),
			cond("Issuing", "False", "Failed", "The certificate request has failed to complete and will be retried: denied", 2)}}, ErrCertificateNotReady, "denied"},
		{"failed, condition gone", map[string]any{"lastFailureTime": "2026-12-02T10:00:00Z", "conditions": []any{cond("Ready", "False", "DoesNotExist", "no Secret", 2)}},
			ErrCertificateNotReady, "its issuance failed: DoesNotExist: no Secret"},
		{"failed before, issuing again", map[string]any{"lastFailureTime": "2026-12-02T10:00:00Z", "conditions": []any{cond("Issuing", "True", "Renewing", "again", 2)}},
			ErrCertificateIssuing, "again"},
	} {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		if tc.status != nil {
			u.Object["status"] = tc.status
		}
		u.SetName("demo-server-tls")
		u.SetNamespace("prod")
		u.SetGeneration(2)
		err := certificatePending(u)
		if (tc.want == nil) != (err == nil) || (tc.want != nil && (!errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.contains))) {
			t.Errorf("%s: %v; want %v saying %q", tc.name, err, tc.want, tc.contains)
		}
	}
}
