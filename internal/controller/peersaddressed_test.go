package controller

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/etcdkit/etcd-operator/internal/resources"
)

// TestPeersAddressedToldOnceListening: the operator's word reaches an await-peers that starts listening
// a moment after its pod has its address (its init container starting on a loaded node), instead of
// leaving it to the annotation, a second or two later; a pod that never listens is given up on within
// peersAddressedRetry, with the connection's error.
func TestPeersAddressedToldOnceListening(t *testing.T) {
	const ip = "127.0.0.134"
	told := make(chan struct{}, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+resources.PeersAddressedPath, func(w http.ResponseWriter, _ *http.Request) {
		told <- struct{}{}
		w.WriteHeader(http.StatusNoContent)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}
	t.Cleanup(func() { _ = srv.Close() })
	listening := time.AfterFunc(500*time.Millisecond, func() {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(resources.PeerPort)))
		if err != nil {
			t.Errorf("listen: %v", err)
			return
		}
		go func() { _ = srv.Serve(l) }()
	})
	defer listening.Stop()
	if err := tellPeersAddressedSoon(context.Background(), ip); err != nil {
		t.Fatalf("told a pod that listens 500ms later: %v", err)
	}
	select {
	case <-told:
	default:
		t.Error("the server was not told")
	}

	start := time.Now()
	err := tellPeersAddressedSoon(context.Background(), "127.0.0.135")
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("a pod that never listens: %v, want connection refused", err)
	}
	if took := time.Since(start); took < peersAddressedRetry || took > peersAddressedRetry+2*time.Second {
		t.Errorf("gave up after %s, want about %s", took, peersAddressedRetry)
	}
}
