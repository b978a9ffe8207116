package testutil

import (
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// EmbedReadyTimeout bounds how long StartEtcd waits for a member to serve.
const EmbedReadyTimeout = 30 * time.Second

// StartEtcd starts an in-process etcd member with cfg, closes it when the test ends, and waits until
// it serves clients; it fails t when the member does not start, stops, or does not serve within
// EmbedReadyTimeout.
func StartEtcd(t testing.TB, cfg *embed.Config) *embed.Etcd {
	t.Helper()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start etcd member %s: %v", cfg.Name, err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("etcd member %s stopped: %v", cfg.Name, err)
	case <-time.After(EmbedReadyTimeout):
		t.Fatalf("etcd member %s not ready within %s", cfg.Name, EmbedReadyTimeout)
	}
	return e
}
