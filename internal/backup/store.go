package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/etcdkit/etcd-operator/internal/backup/policy"
)

// Errors the stores and the backup and restore functions wrap, so that callers can tell the user
// what to do. Test with errors.Is.
var (
	// ErrNotFound: no object at the key.
	ErrNotFound = errors.New("not found")
	// ErrAccessDenied: the storage refused the credentials or the operation (S3 AccessDenied,
	// InvalidAccessKeyId, SignatureDoesNotMatch; a directory without permission).
	ErrAccessDenied = errors.New("access denied")
	// ErrBucketNotFound: the S3 bucket does not exist.
	ErrBucketNotFound = errors.New("bucket does not exist")
	// ErrUnreachable: the storage could not be reached at all (connection refused, DNS, TLS).
	ErrUnreachable = errors.New("storage unreachable")
	// ErrUntrustedCertificate: the S3 server's TLS certificate did not verify against the trusted CAs
	// (the system's and those of S3Config.CACertPEM), or not for its host name; it wraps
	// ErrUnreachable.
	ErrUntrustedCertificate = fmt.Errorf("%w: server certificate not trusted", ErrUnreachable)
	// ErrInvalidKey: a key that is empty, absolute, or has empty, "." or ".." elements (policy's, so
	// that errors.Is matches what policy.Key returns too).
	ErrInvalidKey = policy.ErrInvalidKey
)

// Object is one stored object as List reports it.
type Object struct {
	// Key is the object's key relative to the store's root (S3: without the configured prefix).
	Key string
	// Size is the object's size in bytes.
	Size int64
	// LastModified is when the object was last written.
	LastModified time.Time
}

// PutOptions are optional properties of a stored object.
type PutOptions struct {
	// SHA256 is the hex sha256 of the content. S3 stores it as user metadata (x-amz-meta-sha256);
	// the directory store has no metadata and ignores it (the backup's manifest carries it).
	SHA256 string
	// ContentType is the object's media type (S3 only); default application/octet-stream.
	ContentType string
}

// Store is where backups are kept: an S3 bucket (NewS3Store) or a directory such as a mounted
// PersistentVolumeClaim (NewDirStore). Keys are slash-separated relative paths ("ns/cluster/b.db").
// Implementations are safe for concurrent use.
type Store interface {
	// Put stores the size bytes read from r under key and returns the object's location
	// ("s3://bucket/prefix/key" or "file:///dir/key"). The object appears at key only once all of
	// it was written: when Put fails (r fails, fewer than size bytes, ctx ends, the storage
	// refuses), there is no new object at key and nothing partial is left behind. An existing
	// object at key is replaced.
	Put(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) (location string, err error)

	// Get opens the object at key for reading; the caller closes it. It returns an error wrapping
	// ErrNotFound when there is no such object.
	Get(ctx context.Context, key string) (io.ReadCloser, error)

	// Delete removes the object at key; deleting a missing object is not an error.
	Delete(ctx context.Context, key string) error

	// List returns the objects whose key starts with prefix ("" for all), sorted by key.
	List(ctx context.Context, prefix string) ([]Object, error)

	// Location is where key is or would be stored, in Put's form.
	Location(key string) string
}

// checkKey returns an error wrapping ErrInvalidKey unless key is a valid relative slash-separated
// path: non-empty, no leading or trailing slash, no empty, "." or ".." element.
func checkKey(key string) error {
	if !fs.ValidPath(key) || key == "." {
		return fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	return nil
}
