package policy

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidKey: a key, or a part of one, that is empty, absolute, or has empty, "." or ".." elements.
var ErrInvalidKey = errors.New("invalid key")

// ManifestSuffix is appended to a snapshot's key to name its manifest.
const ManifestSuffix = ".json"

// Key returns the key of backup name of cluster in namespace: "<namespace>/<cluster>/<name>.db".
// A store adds its own prefix (S3) or root directory. Each part must be non-empty and must not
// contain "/" or be "." or "..".
func Key(namespace, cluster, name string) (string, error) {
	for _, p := range []struct{ what, v string }{{"namespace", namespace}, {"cluster", cluster}, {"backup name", name}} {
		if p.v == "" || p.v == "." || p.v == ".." || strings.ContainsAny(p.v, "/\\") {
			return "", fmt.Errorf("%w: %s %q", ErrInvalidKey, p.what, p.v)
		}
	}
	return namespace + "/" + cluster + "/" + name + ".db", nil
}

// ManifestKey returns the key of the manifest of the snapshot at key: key + ".json".
func ManifestKey(key string) string { return key + ManifestSuffix }
