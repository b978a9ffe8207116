package webhook

import (
	"context"
	"crypto/tls"
	"net/http"
	"sync/atomic"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// DrainPeriod is how long the webhook server keeps answering after the operator is told to stop
// (after the pod's preStop sleep), with every response closing its connection: the API server's next
// call then opens a new connection, which the Service routes to a pod that is not stopping, instead of
// reusing one to this pod just as it closes ("use of closed network connection").
const DrainPeriod = 5 * time.Second

// drainingServer is a webhook server that drains before it stops: see DrainPeriod.
type drainingServer struct {
	crwebhook.Server
	period   time.Duration
	draining atomic.Bool
}

// newDrainingServer wraps a controller-runtime webhook server that speaks HTTP/1.1 only: with HTTP/2
// the API server sends every call over one long-lived connection, which a closing response cannot
// move to another pod.
func newDrainingServer(o crwebhook.Options, period time.Duration) *drainingServer {
	o.TLSOpts = append(o.TLSOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	return &drainingServer{Server: crwebhook.NewServer(o), period: period}
}

// Register registers hook at path, answering with "Connection: close" while the server drains.
func (d *drainingServer) Register(path string, hook http.Handler) {
	d.Server.Register(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		hook.ServeHTTP(w, r)
	}))
}

// Start serves until ctx is done, then drains for the period, then stops; it returns the server's
// error, nil once stopped.
func (d *drainingServer) Start(ctx context.Context) error {
	serving, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	go func() {
		select {
		case <-ctx.Done():
		case <-serving.Done():
			return
		}
		d.draining.Store(true)
		ctrl.Log.WithName("webhook").Info("Draining the webhook server: responses close their connections", "for", d.period)
		select {
		case <-time.After(d.period):
		case <-serving.Done():
		}
		stop()
	}()
	return d.Server.Start(serving)
}
