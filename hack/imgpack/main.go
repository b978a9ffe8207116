// Command imgpack packs static files (typically CGO_ENABLED=0 binaries) into a single-layer container
// image and writes it as a docker-archive tarball that `ctr -n k8s.io images import` (and `docker load`)
// accept. It needs no Docker engine and no registry, which is what the local cluster of hack/ has.
//
// Usage:
//
//	imgpack -o OUT.tar -name docker.io/local/NAME:TAG -entrypoint /path [-arg x]... [-user 65532]
//	        [-port 2379/tcp]... [-env K=V]... [-label K=V]... [-workdir /] [-symlink /bin/sh=busybox]...
//	        SRC:DEST[:MODE]...
//
// Each SRC:DEST[:MODE] copies the host file SRC to the absolute path DEST in the image, with the octal
// MODE (default: the mode of SRC). Besides these files the layer holds what programs and runtimes expect
// to find: /etc/passwd and /etc/group (root, nobody, nonroot 65532), /etc/nsswitch.conf, and the
// directories /dev, /etc, /home/nonroot, /proc, /root, /sys, /tmp (1777) and /var. There is no shell
// unless one is packed.
//
// Each -label K=V is a label of the image's configuration (what `docker inspect` and registries show
// as its labels), for example org.opencontainers.image.version=v0.2.0, the OCI annotation key of the
// version the image runs.
//
// The output is deterministic: entries are sorted, owned by root (nonroot's home by 65532) and have zero
// mtimes, and the config's creation time is the Unix epoch, so the same inputs give the same image ID.
//
// Name images fully qualified (docker.io/local/etcd:v3.6.16) with a tag other than latest: the CRI
// plugin normalizes the image of a pod spec to its fully qualified name before looking it up, and a
// non-latest tag makes kubelet's default pull policy IfNotPresent.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// list is a repeatable string flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

const nonrootUID = 65532

var epoch = time.Unix(0, 0).UTC()

// entry is one member of the layer tarball.
type entry struct {
	hdr  tar.Header
	data []byte
}

func main() {
	var (
		out, ref, entrypoint, user, workdir string
		args, ports, envs, labels, symlinks list
	)
	flag.StringVar(&out, "o", "", "output tarball (required)")
	flag.StringVar(&ref, "name", "", "image reference, e.g. docker.io/local/etcd:v3.6.16 (required)")
	flag.StringVar(&entrypoint, "entrypoint", "", "entrypoint path in the image (required)")
	flag.Var(&args, "arg", "default argument (image Cmd); repeatable")
	flag.StringVar(&user, "user", "", "user to run as, e.g. 65532 (default: root)")
	flag.StringVar(&workdir, "workdir", "/", "working directory")
	flag.Var(&ports, "port", "exposed port, e.g. 2379/tcp; repeatable")
	flag.Var(&envs, "env", "environment variable K=V; repeatable")
	flag.Var(&labels, "label", "image label K=V, e.g. org.opencontainers.image.version=v0.2.0; repeatable")
	flag.Var(&symlinks, "symlink", "symbolic link LINK=TARGET, e.g. /bin/sh=busybox; repeatable")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s -o OUT.tar -name REF -entrypoint PATH [flags] SRC:DEST[:MODE]...\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if out == "" || ref == "" || entrypoint == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(out, ref, entrypoint, user, workdir, image{args: args, ports: ports, envs: envs, labels: labels}, symlinks, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "imgpack:", err)
		os.Exit(1)
	}
}

// image holds the repeatable flags that configure how the image runs and what it says of itself.
type image struct{ args, ports, envs, labels []string }

func run(out, ref, entrypoint, user, workdir string, im image, symlinks, files []string) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image name %q: %w (use a fully qualified name with a tag)", ref, err)
	}
	entries, err := layerEntries(files, symlinks)
	if err != nil {
		return err
	}
	layerTar, err := tarEntries(entries)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return err
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "imgpack"},
	})
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	if err := configure(cf, entrypoint, user, workdir, im); err != nil {
		return err
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, out); err != nil {
		return err
	}
	id, err := img.ConfigName()
	if err != nil {
		return err
	}
	fmt.Printf("%s %s %s\n", out, tag.String(), id)
	return nil
}

// configure sets the image configuration: creation time, platform, how the container runs, labels.
// A label that is not K=V with a non-empty K is an error.
func configure(cf *v1.ConfigFile, entrypoint, user, workdir string, im image) error {
	cf.Created = v1.Time{Time: epoch}
	cf.Architecture, cf.OS = runtime.GOARCH, "linux"
	cf.Config.Entrypoint = []string{entrypoint}
	cf.Config.Cmd = im.args
	cf.Config.User = user
	cf.Config.WorkingDir = workdir
	cf.Config.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, im.envs...)
	for _, l := range im.labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return fmt.Errorf("bad -label %q, want KEY=VALUE", l)
		}
		if cf.Config.Labels == nil {
			cf.Config.Labels = map[string]string{}
		}
		cf.Config.Labels[k] = v
	}
	if len(im.ports) > 0 {
		cf.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range im.ports {
			if !strings.Contains(p, "/") {
				p += "/tcp"
			}
			cf.Config.ExposedPorts[p] = struct{}{}
		}
	}
	return nil
}

// layerEntries returns the members of the image's only layer, keyed by path without leading slash.
func layerEntries(files, symlinks []string) (map[string]*entry, error) {
	m := map[string]*entry{}
	dir := func(p string, mode int64, uid int) {
		m[p] = &entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: mode, Uid: uid, Gid: uid}}
	}
	file := func(p string, data []byte, mode int64) {
		m[p] = &entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: mode, Size: int64(len(data))}, data: data}
	}
	for _, d := range []string{"dev", "etc", "home", "proc", "sys", "var"} {
		dir(d, 0o755, 0)
	}
	dir("root", 0o700, 0)
	dir("tmp", 0o1777, 0)
	dir("home/nonroot", 0o700, nonrootUID)
	file("etc/passwd", []byte("root:x:0:0:root:/root:/sbin/nologin\n"+
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"+
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"), 0o644)
	file("etc/group", []byte("root:x:0:\nnonroot:x:65532:\nnogroup:x:65534:\n"), 0o644)
	file("etc/nsswitch.conf", []byte("hosts: files dns\n"), 0o644)

	seen := map[string]bool{}
	claim := func(p, what string) (string, error) {
		c := path.Clean("/" + p)
		if !path.IsAbs(p) || c == "/" {
			return "", fmt.Errorf("%s: destination %q must be an absolute file path", what, p)
		}
		c = c[1:]
		if seen[c] {
			return "", fmt.Errorf("%s: destination %q given twice", what, p)
		}
		seen[c] = true
		return c, nil
	}
	for _, spec := range files {
		dest, data, mode, err := readFileArg(spec, claim)
		if err != nil {
			return nil, err
		}
		file(dest, data, mode)
	}
	for _, s := range symlinks {
		link, target, ok := strings.Cut(s, "=")
		if !ok || target == "" {
			return nil, fmt.Errorf("bad -symlink %q, want LINK=TARGET", s)
		}
		p, err := claim(link, "-symlink "+s)
		if err != nil {
			return nil, err
		}
		m[p] = &entry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: p, Linkname: target, Mode: 0o777}}
	}
	if err := addParentDirs(m); err != nil {
		return nil, err
	}
	return m, nil
}

// addParentDirs adds the missing parent directories of everything in m (0755, owned by root).
func addParentDirs(m map[string]*entry) error {
	for p := range m {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, ok := m[d]; !ok {
				m[d] = &entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, Uid: 0, Gid: 0}}
			} else if m[d].hdr.Typeflag != tar.TypeDir {
				return fmt.Errorf("%s is a file, but %s is below it", d, p)
			}
		}
	}
	return nil
}

// readFileArg reads the file of a SRC:DEST[:MODE] argument; claim checks DEST and records it as taken.
func readFileArg(spec string, claim func(p, what string) (string, error)) (dest string, data []byte, mode int64, err error) {
	parts := strings.Split(spec, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" {
		return "", nil, 0, fmt.Errorf("bad file argument %q, want SRC:DEST[:MODE]", spec)
	}
	if dest, err = claim(parts[1], spec); err != nil {
		return "", nil, 0, err
	}
	st, err := os.Stat(parts[0])
	if err != nil {
		return "", nil, 0, err
	}
	if !st.Mode().IsRegular() {
		return "", nil, 0, fmt.Errorf("%s: not a regular file", parts[0])
	}
	mode = int64(st.Mode().Perm())
	if len(parts) == 3 {
		if mode, err = strconv.ParseInt(parts[2], 8, 32); err != nil {
			return "", nil, 0, fmt.Errorf("%s: bad octal mode: %w", spec, err)
		}
	}
	if data, err = os.ReadFile(parts[0]); err != nil {
		return "", nil, 0, err
	}
	return dest, data, mode, nil
}

// tarEntries writes the entries sorted by path (a directory before its contents) with zero mtimes.
func tarEntries(m map[string]*entry) ([]byte, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, k := range keys {
		e := m[k]
		e.hdr.ModTime = epoch
		if err := tw.WriteHeader(&e.hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
