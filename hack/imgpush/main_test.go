package main

import (
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// imageTarball writes a random 2-layer image as a docker-archive tarball (as imgpack does) and returns
// its path and manifest digest.
func imageTarball(t *testing.T) (string, string) {
	t.Helper()
	img, err := random.Image(4096, 2)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "img.tar")
	if err := tarball.WriteToFile(p, name.MustParseReference("docker.io/local/test:dev"), img); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return p, d.String()
}

// quietRegistry is the in-memory registry without its request log.
func quietRegistry() http.Handler { return registry.New(registry.Logger(log.New(io.Discard, "", 0))) }

// host returns a test server's host:port.
func host(srv *httptest.Server) string {
	return strings.TrimPrefix(strings.TrimPrefix(srv.URL, "http://"), "https://")
}

// TestPushPrintsTheDigestTheRegistryServes: a push returns the image by digest, and the registry
// serves that digest under the tag.
func TestPushPrintsTheDigestTheRegistryServes(t *testing.T) {
	path, digest := imageTarball(t)
	srv := httptest.NewServer(quietRegistry())
	defer srv.Close()
	ref := host(srv) + "/etcd-operator:v0.0.1"
	var log strings.Builder
	got, err := push(path, ref, false, &log)
	if err != nil {
		t.Fatal(err)
	}
	if want := host(srv) + "/etcd-operator@" + digest; got != want {
		t.Errorf("push returned %q, want %q", got, want)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(tag)
	if err != nil {
		t.Fatal(err)
	}
	if desc.Digest.String() != digest {
		t.Errorf("the registry serves %s under the tag, want %s", desc.Digest, digest)
	}
	img, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "image ID "+id.String()) {
		t.Errorf("the progress log does not name the image ID %s:\n%s", id, log.String())
	}
	if !strings.Contains(log.String(), "pushed "+ref) {
		t.Errorf("no summary in the progress log:\n%s", log.String())
	}
}

// TestPushRefusesAReferenceWithoutTag: the tag is never defaulted to latest.
func TestPushRefusesAReferenceWithoutTag(t *testing.T) {
	path, _ := imageTarball(t)
	_, err := push(path, "127.0.0.1:1/etcd-operator", false, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "tag included") {
		t.Fatalf("push without a tag: %v, want an error that asks for the tag", err)
	}
}

// TestPushLogsInWithDockerConfig: a registry that wants basic auth gets the credentials of
// $DOCKER_CONFIG/config.json, and without them the error says to log in.
func TestPushLogsInWithDockerConfig(t *testing.T) {
	path, _ := imageTarball(t)
	reg := quietRegistry()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "pusher" || p != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	ref := host(srv) + "/etcd-operator:v0.0.1"

	t.Setenv("DOCKER_CONFIG", t.TempDir())
	if _, err := push(path, ref, false, io.Discard); err == nil || !strings.Contains(err.Error(), "log in to "+host(srv)) {
		t.Fatalf("push without credentials: %v, want an error that says to log in", err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte("pusher:s3cret"))
	cfg := fmt.Sprintf(`{"auths": {%q: {"auth": %q}}}`, host(srv), auth)
	if err := os.WriteFile(filepath.Join(os.Getenv("DOCKER_CONFIG"), "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := push(path, ref, false, io.Discard); err != nil {
		t.Fatalf("push with the credentials of config.json: %v", err)
	}
}

// TestInsecureAcceptsACertificateThatDoesNotVerify: a registry whose certificate this machine does not
// trust is refused, unless insecure (INSECURE_REGISTRY=1) says to accept it.
func TestInsecureAcceptsACertificateThatDoesNotVerify(t *testing.T) {
	path, digest := imageTarball(t)
	srv := httptest.NewUnstartedServer(quietRegistry())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	defer srv.Close()
	ref := host(srv) + "/etcd-operator:v0.0.1"
	if _, err := push(path, ref, false, io.Discard); err == nil || !strings.Contains(err.Error(), "INSECURE_REGISTRY=1") {
		t.Fatalf("push to an untrusted certificate: %v, want an error that names INSECURE_REGISTRY=1", err)
	}
	got, err := push(path, ref, true, io.Discard)
	if err != nil {
		t.Fatalf("insecure push: %v", err)
	}
	if !strings.HasSuffix(got, "@"+digest) {
		t.Errorf("insecure push returned %q, want digest %s", got, digest)
	}
}

// TestEnvTrue: what INSECURE_REGISTRY accepts as yes.
func TestEnvTrue(t *testing.T) {
	for v, want := range map[string]bool{"1": true, "true": true, "TRUE": true, "": false, "0": false, "no": false, "false": false} {
		if got := envTrue(v); got != want {
			t.Errorf("envTrue(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestPushSaysWhatToCheckWhenNothingAnswers: a push to an address where nothing listens, or to a name
// that does not resolve, says so, and does not suggest INSECURE_REGISTRY=1, which would not help.
func TestPushSaysWhatToCheckWhenNothingAnswers(t *testing.T) {
	path, _ := imageTarball(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]string{
		closed + "/etcd-operator:v0.0.1":             "nothing accepts connections at " + closed,
		"registry.invalid:5000/etcd-operator:v0.0.1": "registry.invalid does not resolve",
	} {
		_, err := push(path, ref, false, io.Discard)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "INSECURE_REGISTRY") {
			t.Errorf("push to %s: %v, want an error that says %q and does not name INSECURE_REGISTRY", ref, err, want)
		}
	}
}

// TestCheckRef: a reference needs a tag, and a tag that names a release must be the version the
// image was built as.
func TestCheckRef(t *testing.T) {
	for _, c := range []struct {
		ref, version string
		refused      bool
	}{
		{"registry.example.com/etcd-operator:v0.2.0", "v0.2.0", false},
		{"registry.example.com/etcd-operator:v0.3.0", "v0.2.0", true},
		{"registry.example.com/etcd-operator:v0.3.0", "99e045e-dirty", true},
		{"registry.example.com/etcd-operator:v0.3.0-rc.1", "v0.3.0", true},
		{"localhost:5000/etcd-operator:v1.0.0", "v1.0.0", false},
		{"registry.example.com/etcd-operator:dev", "v0.2.0", false},
		{"registry.example.com/etcd-operator:latest", "99e045e", false},
		{"registry.example.com/etcd-operator:v0.3.0", "", false},
		{"registry.example.com/etcd-operator", "v0.3.0", true},
		{"127.0.0.1:1/etcd-operator", "", true},
	} {
		err := checkRef(c.ref, c.version)
		if (err != nil) != c.refused {
			t.Errorf("checkRef(%q, %q) = %v, want refused %v", c.ref, c.version, err, c.refused)
		}
		if err != nil && !strings.Contains(err.Error(), "make push VERSION=") {
			t.Errorf("checkRef(%q, %q) = %v: does not say what to run", c.ref, c.version, err)
		}
	}
}
