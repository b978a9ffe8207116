package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestLabelsAreInTheImageConfig: each -label is a label of the image's configuration, where registries
// and `docker inspect` show it; a label without KEY= is refused.
func TestLabelsAreInTheImageConfig(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "app")
	if err := os.WriteFile(bin, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "img.tar")
	im := image{labels: []string{"org.opencontainers.image.version=v0.2.0", "empty="}}
	if err := run(out, "docker.io/local/app:dev", "/app", "65532", "/", im, nil, []string{bin + ":/app"}); err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"org.opencontainers.image.version": "v0.2.0", "empty": ""}
	if len(cf.Config.Labels) != len(want) {
		t.Errorf("labels %v, want %v", cf.Config.Labels, want)
	}
	for k, v := range want {
		if got, ok := cf.Config.Labels[k]; !ok || got != v {
			t.Errorf("label %s = %q (present: %v), want %q", k, got, ok, v)
		}
	}
	err = run(out, "docker.io/local/app:dev", "/app", "", "/", image{labels: []string{"=v1"}}, nil, []string{bin + ":/app"})
	if err == nil || !strings.Contains(err.Error(), "KEY=VALUE") {
		t.Errorf("a label without a key: %v, want it refused", err)
	}
}
