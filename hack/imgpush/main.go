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
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
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
	version := flag.String("version", "", "the version the image was built as (make's VERSION); a tag that names another release version is refused")
	check := flag.Bool("check", false, "only check REGISTRY/NAME:TAG (and -version), before the image is built; no TARBALL")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [-insecure] [-version VERSION] TARBALL REGISTRY/NAME:TAG\n       %[1]s -check [-version VERSION] REGISTRY/NAME:TAG\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if want := map[bool]int{false: 2, true: 1}[*check]; flag.NArg() != want {
		flag.Usage()
		os.Exit(2)
	}
	if err := checkRef(flag.Arg(flag.NArg()-1), *version); err != nil {
		fmt.Fprintln(os.Stderr, "imgpush:", err)
		os.Exit(2)
	}
	if *check {
		return
	}
	ref, err := push(flag.Arg(0), flag.Arg(1), *insecure, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "imgpush:", err)
		os.Exit(1)
	}
	fmt.Println(ref)
}

// releaseTag matches a tag that names a release: v, then a semantic version.
var releaseTag = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+([-+].*)?$`)

// checkRef refuses ref when it has no tag (the tag is never defaulted to latest; make release takes
// the repository without it), and refuses to push the image built as version under a tag that names
// another release (IMG=...:v0.3.0 with VERSION=v0.2.0, or unset): the binary, its log and the image's
// version label would say one version and the tag another. Tags that name no release (dev, latest, a
// commit) and an empty version are not checked against it.
func checkRef(ref, version string) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image reference %q: %w (give REGISTRY/NAME:TAG, tag included, e.g. make push VERSION=v0.2.0 IMG=%[1]s:v0.2.0; make release takes IMG without the tag)", ref, err)
	}
	if version == "" || !releaseTag.MatchString(tag.TagStr()) || tag.TagStr() == version {
		return nil
	}
	return fmt.Errorf("the tag of %s names release %s, but the image was built as %s: run make push VERSION=%[2]s IMG=%[1]s (make image then builds it as %[2]s)",
		ref, tag.TagStr(), version)
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
	id, err := img.ConfigName() // the image ID, as `make release` and container runtimes print it
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
	fmt.Fprintf(log, "pushing %s (%.1f MB, image ID %s, manifest digest %s) to %s\n", path, float64(size)/1e6, id, digest, tag)
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
// address when nothing answers there or its name does not resolve, INSECURE_REGISTRY=1 when the
// registry speaks plain HTTP or has a certificate this machine does not trust.
func explain(tag name.Tag, insecure bool, err error) error {
	var terr *transport.Error
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &terr) && (terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden):
		return fmt.Errorf("push %s: %w (log in to %s first, e.g. `docker login %[3]s`: credentials are read from $DOCKER_CONFIG/config.json or ~/.docker/config.json)",
			tag, err, tag.RegistryStr())
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("push %s: %w (nothing accepts connections at %s: check the registry's address and port, and that it runs)", tag, err, tag.RegistryStr())
	case errors.As(err, &dnsErr):
		return fmt.Errorf("push %s: %w (%s does not resolve on this machine: check the registry's name)", tag, err, dnsErr.Name)
	case !insecure && untrusted(err):
		return fmt.Errorf("push %s: %w (a registry that speaks plain HTTP, or has a certificate this machine does not trust, needs INSECURE_REGISTRY=1)", tag, err)
	}
	return fmt.Errorf("push %s: %w", tag, err)
}

// untrusted tells whether err is a TLS handshake that failed: a certificate that does not verify, or
// a server that answered in plain HTTP.
func untrusted(err error) bool {
	var unknown x509.UnknownAuthorityError
	var verify *tls.CertificateVerificationError
	var invalid x509.CertificateInvalidError
	var hostname x509.HostnameError
	var header tls.RecordHeaderError
	return errors.As(err, &unknown) || errors.As(err, &verify) || errors.As(err, &invalid) || errors.As(err, &hostname) ||
		errors.As(err, &header) || strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
}
