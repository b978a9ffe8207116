package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestAwaitAdd: await-add keeps asking the peers' /members while they do not list its peer URL (one
// peer not answering at all), and returns once one lists it; it reports what it waits for meanwhile.
func TestAwaitAdd(t *testing.T) {
	const self = "https://demo-3.demo-peer.ns.svc.cluster.local:2380"
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/members" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		members := []peerMember{{ID: 1, Name: "demo-0", PeerURLs: []string{"https://demo-0:2380"}}}
		if asked.Add(1) > 3 {
			members = append(members, peerMember{ID: 0xab, PeerURLs: []string{self}})
		}
		_ = json.NewEncoder(w).Encode(members)
	}))
	defer srv.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // a peer that does not answer

	var out bytes.Buffer
	cmd := newAwaitAddCommand()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--peer-url=" + self, "--peers=" + down.URL + "," + srv.URL, "--interval=10ms", "--progress-interval=20ms"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("await-add: %v\n%s", err, out.String())
	}
	if n := asked.Load(); n != 4 {
		t.Errorf("the peer was asked %d times, want 4 (it lists the member the 4th time)", n)
	}
	if !strings.Contains(out.String(), "etcd lists member ab at "+self) {
		t.Errorf("output does not say the member is listed:\n%s", out.String())
	}
}

// TestAwaitAddFlags: the peer URL and the peers are required.
func TestAwaitAddFlags(t *testing.T) {
	cmd := newAwaitAddCommand()
	cmd.SetArgs([]string{"--peers=http://x:2380"})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--peer-url") {
		t.Errorf("without --peer-url: %v", err)
	}
}
