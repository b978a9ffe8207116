package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// runAwaitPeersCmd starts await-peers with args and returns its output buffer and a channel that
// receives its result.
func runAwaitPeersCmd(t *testing.T, args ...string) (*testutil.SyncBuffer, <-chan error) {
	t.Helper()
	out := &testutil.SyncBuffer{}
	cmd := newAwaitPeersCommand()
	cmd.SetOut(out)
	cmd.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	return out, done
}

// awaitReturn waits for await-peers' result on done and fails the test on an error or when it still
// waits after 10 s, which means that what should have ended the wait (what) did not.
func awaitReturn(t *testing.T, done <-chan error, out *testutil.SyncBuffer, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("await-peers: %v\n%s", err, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("await-peers still waits after %s:\n%s", what, out.String())
	}
}

// TestAwaitPeersTold: await-peers waits while the annotation is absent or not "true", and returns at
// once when the operator POSTs on its listening address, which it then frees for etcd.
func TestAwaitPeersTold(t *testing.T) {
	file := filepath.Join(t.TempDir(), "annotations")
	if err := os.WriteFile(file, []byte(etcdv1beta1.AnnotationPeersAddressed+`="false"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	out, done := runAwaitPeersCmd(t, "--annotations-file="+file, "--annotation="+etcdv1beta1.AnnotationPeersAddressed,
		"--listen="+addr, "--interval=10ms", "--progress-interval=20ms")
	var code int
	var exited error // await-peers returned before it took the POST (it could not listen on addr?)
	testutil.Eventually(t, 10*time.Second, "await-peers takes the POST", func(ctx context.Context) error {
		select {
		case err := <-done:
			exited = fmt.Errorf("await-peers returned before the POST (%w): %s", err, out.String())
		default:
		}
		if exited != nil {
			return exited
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+resources.PeersAddressedPath, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		code = resp.StatusCode
		return nil
	})
	if code != http.StatusNoContent {
		t.Errorf("the POST was answered %d, want 204", code)
	}
	awaitReturn(t, done, out, "the POST")
	if !strings.Contains(out.String(), "the operator's POST") {
		t.Errorf("output does not say what ended the wait:\n%s", out.String())
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("await-peers did not free %s for etcd: %v", addr, err)
	}
	_ = ln.Close()
}

// TestAwaitPeersAnnotation: without a listening address, await-peers returns once the kubelet writes the
// annotation "true" into the downward API file (values quoted as Go quotes them), reporting the wait
// meanwhile.
func TestAwaitPeersAnnotation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "annotations")
	other := `etcd.etcdkit.dev/spec-hash="a\"b=c"` + "\n"
	if err := os.WriteFile(file, []byte(other), 0o600); err != nil {
		t.Fatal(err)
	}
	out, done := runAwaitPeersCmd(t, "--annotations-file="+file, "--annotation="+etcdv1beta1.AnnotationPeersAddressed,
		"--interval=10ms", "--progress-interval=20ms")
	testutil.Eventually(t, 10*time.Second, "a progress line", func(context.Context) error {
		if !strings.Contains(out.String(), "waiting") {
			return fmt.Errorf("output so far: %q", out.String())
		}
		return nil
	})
	select {
	case err := <-done:
		t.Fatalf("await-peers returned (%v) before the annotation was set:\n%s", err, out.String())
	default:
	}
	if err := os.WriteFile(file, []byte(other+etcdv1beta1.AnnotationPeersAddressed+`="true"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	awaitReturn(t, done, out, "the annotation was set")
	if !strings.Contains(out.String(), "the pod's annotation") {
		t.Errorf("output does not say what ended the wait:\n%s", out.String())
	}
}

// TestAwaitPeersMaxWait: with no word at all (the file missing), etcd starts after --max-wait, saying
// why; flags are required.
func TestAwaitPeersMaxWait(t *testing.T) {
	out, done := runAwaitPeersCmd(t, "--annotations-file="+filepath.Join(t.TempDir(), "missing"),
		"--annotation="+etcdv1beta1.AnnotationPeersAddressed, "--interval=10ms", "--max-wait=200ms")
	awaitReturn(t, done, out, "--max-wait")
	if !strings.Contains(out.String(), "no word from the operator") || !strings.Contains(out.String(), "read the pod's annotations") {
		t.Errorf("output does not say why etcd starts anyway:\n%s", out.String())
	}
	cmd := newAwaitPeersCommand()
	cmd.SetArgs([]string{"--annotation=x"})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--annotations-file") {
		t.Errorf("without --annotations-file: %v", err)
	}
}

// TestAnnotationValue: the value of one annotation among others, unquoted; "" when absent; an error
// for a value that is not quoted.
func TestAnnotationValue(t *testing.T) {
	file := filepath.Join(t.TempDir(), "annotations")
	content := "a=\"1\"\nkey.example/x=\"line\\nnext \\\"q\\\"\"\nbad=unquoted\n"
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"a": "1", "key.example/x": "line\nnext \"q\"", "missing": ""} {
		if got, err := annotationValue(file, key); err != nil || got != want {
			t.Errorf("annotationValue(%q) = %q, %v; want %q", key, got, err, want)
		}
	}
	if _, err := annotationValue(file, "bad"); err == nil {
		t.Error("an unquoted value: no error")
	}
}
