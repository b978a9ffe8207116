// Command imgpush pushes an image tarball (a docker-archive with one image, as hack/imgpack writes
// it) to a registry, with go-containerregistry: no Docker engine is needed. `make push` runs it.
//
// Usage:
//
//	imgpush [-insecure] TARBALL REGISTRY/NAME:TAG
//
// REGISTRY/NAME:TAG is fully qualified, tag included (ghcr.io/me/etcd-operator:v0.2.0,
// registry.example:5000/etcd-operator:v0.2.0). The pushed manifest is the tarball's, so the digest is
// the same wherever the same tarball is pushed. When the push succeeds, imgpush prints one line on
// standard output, the pushed image by digest:
//
//	REGISTRY/NAME@sha256:<64 hex digits>
//
// and its progress and a summary on standard error.
//
// Credentials come from the default keychain: $DOCKER_CONFIG/config.json, else ~/.docker/config.json
// (as `docker login` or `crane auth login` write it, credential helpers included); a registry without
// an entry there is used anonymously. Plain HTTP: -insecure, or INSECURE_REGISTRY=1 (or true) in the
// environment, lets imgpush speak plain HTTP to the registry and accept a TLS certificate it cannot
// verify. Loopback and private addresses (localhost, 127.0.0.1, 10.x, 192.168.x) fall back to plain
// HTTP without it.
//
// Exit status: 0 pushed; 1 the push or the tarball failed (the message says which and what to check);
// 2 bad usage.
package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	insecure := flag.Bool("insecure", envTrue(os.Getenv("INSECURE_REGISTRY")),
		"speak plain HTTP to the registry and accept a certificate that does not verify (default from INSECURE_REGISTRY=1)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [-insecure] TARBALL REGISTRY/NAME:TAG\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	ref, err := push(flag.Arg(0), flag.Arg(1), *insecure, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "imgpush:", err)
		os.Exit(1)
	}
	fmt.Println(ref)
}

// envTrue reports whether an environment variable's value means yes: 1, t, true (any case), ...
func envTrue(v string) bool {
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

// push pushes the one image of the docker-archive tarball at path to the tag ref, writing progress to
// log, and returns the pushed image as "REGISTRY/NAME@sha256:...". insecure allows plain HTTP and
// TLS certificates that do not verify.
func push(path, ref string, insecure bool, log io.Writer) (string, error) {
	opts := []name.Option{name.StrictValidation}
	if insecure {
		opts = append(opts, name.Insecure)
	}
	tag, err := name.NewTag(ref, opts...)
	if err != nil {
		return "", fmt.Errorf("image reference %q: %w (give REGISTRY/NAME:TAG, tag included)", ref, err)
	}
	img, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		return "", fmt.Errorf("read the image tarball %s: %w (make image writes bin/etcd-operator.tar)", path, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("read the image tarball %s: %w", path, err)
	}
	size, err := imageSize(img)
	if err != nil {
		return "", fmt.Errorf("read the image tarball %s: %w", path, err)
	}
	rt := http.DefaultTransport.(*http.Transport).Clone()
	if insecure {
		rt.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // asked for with -insecure
	}
	progress := make(chan v1.Update, 16)
	done := make(chan struct{})
	start := time.Now()
	fmt.Fprintf(log, "pushing %s (%.1f MB, %s) to %s\n", path, float64(size)/1e6, digest, tag)
	go report(progress, log, start, done)
	err = remote.Write(tag, img, remote.WithAuthFromKeychain(authn.DefaultKeychain), remote.WithTransport(rt),
		remote.WithUserAgent("etcd-operator-imgpush"), remote.WithProgress(progress))
	// remote.Write closes progress when it returns, unless its options were refused
	select {
	case <-done:
	case <-time.After(time.Second):
	}
	if err != nil {
		return "", explain(tag, insecure, err)
	}
	pushed := tag.Context().Digest(digest.String())
	fmt.Fprintf(log, "pushed %s as %s in %s\n", tag, pushed, time.Since(start).Round(100*time.Millisecond))
	return pushed.String(), nil
}

// imageSize returns the bytes of the image's layers and configuration.
func imageSize(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	n := m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n, nil
}

// report prints the push's progress from updates every 2 s (nothing for a push that takes less), and
// closes done once updates is closed.
func report(updates <-chan v1.Update, log io.Writer, start time.Time, done chan<- struct{}) {
	defer close(done)
	last := start
	for u := range updates {
		if u.Error != nil || u.Total == 0 || time.Since(last) < 2*time.Second {
			continue
		}
		last = time.Now()
		fmt.Fprintf(log, "  %5.1f%% of %.1f MB after %s\n", 100*float64(u.Complete)/float64(u.Total), float64(u.Total)/1e6,
			time.Since(start).Round(100*time.Millisecond))
	}
}

// explain adds to a failed push what to check: credentials when the registry refused them, the
// scheme when it does not speak what was tried.
func explain(tag name.Tag, insecure bool, err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) && (terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden) {
		return fmt.Errorf("push %s: %w (log in to %s first, e.g. `docker login %[3]s`: credentials are read from $DOCKER_CONFIG/config.json or ~/.docker/config.json)",
			tag, err, tag.RegistryStr())
	}
	if !insecure {
		return fmt.Errorf("push %s: %w (a registry that speaks plain HTTP, or has a certificate this machine does not trust, needs INSECURE_REGISTRY=1)", tag, err)
	}
	return fmt.Errorf("push %s: %w", tag, err)
}
