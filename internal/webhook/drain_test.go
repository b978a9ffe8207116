package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// innerServer stands in for controller-runtime's server: it records the handlers and serves until its
// context ends. The draining wrapper's own logic is what is tested here; the e2e test
// TestOperatorRolloutKeepsAdmission covers the whole path through a real rollout.
type innerServer struct {
	crwebhook.Server
	handlers map[string]http.Handler
	stopped  chan struct{}
}

func (s *innerServer) Register(path string, h http.Handler) { s.handlers[path] = h }

func (s *innerServer) Start(ctx context.Context) error {
	<-ctx.Done()
	close(s.stopped)
	return nil
}

// TestDrainingServer: until the manager stops, responses keep their connection; once it stops, the
// server keeps answering for the drain period with "Connection: close", and only then stops.
func TestDrainingServer(t *testing.T) {
	inner := &innerServer{handlers: map[string]http.Handler{}, stopped: make(chan struct{})}
	d := &drainingServer{Server: inner, period: 500 * time.Millisecond}
	d.Register("/validate", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	call := func() string {
		rec := httptest.NewRecorder()
		inner.handlers["/validate"].ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/validate", nil))
		return rec.Header().Get("Connection")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Start(ctx) }()
	if got := call(); got != "" {
		t.Fatalf("Connection %q while serving, want none", got)
	}
	cancel()
	stopAsked := time.Now()
	testutil.Eventually(t, 5*time.Second, "responses close their connections", func(context.Context) error {
		if call() != "close" {
			return errors.New("no Connection: close yet")
		}
		return nil
	})
	select {
	case <-inner.stopped:
		t.Fatal("the server stopped before draining")
	default:
	}
	testutil.Eventually(t, 5*time.Second, "the server stopped after draining", func(context.Context) error {
		select {
		case err := <-done:
			if since := time.Since(stopAsked); since < d.period {
				t.Errorf("stopped %s after being told, before the %s drain", since, d.period)
			}
			return err
		default:
			return errors.New("still serving")
		}
	})
}

// TestServerSpeaksHTTP1: the webhook server offers only HTTP/1.1, so that a closing response moves the
// API server's next call to a new connection.
func TestServerSpeaksHTTP1(t *testing.T) {
	s, err := NewServer(Options{Provisioner: ProvisionerExternal, CertDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	d, ok := s.(*drainingServer)
	if !ok || d.period != DrainPeriod {
		t.Fatalf("NewServer returned %T, want a draining server with the default period", s)
	}
	inner, ok := d.Server.(*crwebhook.DefaultServer)
	if !ok {
		t.Fatalf("inner server %T", d.Server)
	}
	cfg := &tls.Config{NextProtos: []string{"h2"}} // what controller-runtime starts from
	for _, opt := range inner.Options.TLSOpts {
		opt(cfg)
	}
	if fmt.Sprint(cfg.NextProtos) != "[http/1.1]" {
		t.Errorf("NextProtos %v, want [http/1.1]", cfg.NextProtos)
	}
}
