package backup

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// SHA256MetadataKey is the user metadata key under which S3 objects carry their content's hex
// sha256 (sent as the x-amz-meta-sha256 header).
const SHA256MetadataKey = "Sha256"

// S3Config says how to reach an S3-compatible bucket.
type S3Config struct {
	// Endpoint is the server's URL, "https://host[:port]" or "http://host[:port]" (plain HTTP);
	// a bare "host[:port]" means https. Empty means AWS S3 (https://s3.amazonaws.com).
	Endpoint string
	// Bucket is the bucket's name; it must exist.
	Bucket string
	// Prefix is prepended to every key, with a "/" between ("backups" stores key "a/b.db" as
	// "backups/a/b.db"); empty for none.
	Prefix string
	// Region is the bucket's region, e.g. "us-east-1"; empty lets the client ask the server.
	Region string
	// ForcePathStyle addresses the bucket as https://host/bucket/key instead of
	// https://bucket.host/key; most self-hosted servers (MinIO, Ceph RGW, versitygw) need it.
	ForcePathStyle bool
	// CACertPEM are PEM certificates trusted for https in addition to the system's; empty for the
	// system's only.
	CACertPEM []byte
	// AccessKeyID and SecretAccessKey are the credentials; never logged.
	AccessKeyID     string
	SecretAccessKey string
}

// S3Store keeps objects in an S3 bucket through minio-go. Objects larger than 16 MiB are uploaded
// as multipart uploads (16 MiB parts up to 156 GiB, 4 in parallel); a failed multipart upload is
// aborted, so no object and no parts are left behind.
type S3Store struct {
	client *minio.Client
	bucket string
	prefix string
}

var _ Store = (*S3Store)(nil)

// NewS3Store returns a store for cfg. It does not contact the server: wrong credentials or a
// missing bucket show in the first call, as errors wrapping ErrAccessDenied or ErrBucketNotFound.
func NewS3Store(cfg S3Config) (*S3Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("s3: no bucket")
	}
	endpoint := cfg.Endpoint
	if endpoint == "" {
		endpoint = "https://s3.amazonaws.com"
	}
	if !strings.Contains(endpoint, "://") {
		endpoint = "https://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("s3 endpoint %q: %w", cfg.Endpoint, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("s3 endpoint %q: want http(s)://host[:port]", cfg.Endpoint)
	}
	secure := u.Scheme == "https"
	transport, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, fmt.Errorf("s3 transport: %w", err)
	}
	if len(cfg.CACertPEM) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(cfg.CACertPEM) {
			return nil, errors.New("s3 CA: no PEM certificate found")
		}
		if transport.TLSClientConfig == nil {
			transport.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		transport.TLSClientConfig.RootCAs = pool
	}
	lookup := minio.BucketLookupAuto
	if cfg.ForcePathStyle {
		lookup = minio.BucketLookupPath
	}
	client, err := minio.New(u.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKeyID, cfg.SecretAccessKey, ""),
		Secure:       secure,
		Region:       cfg.Region,
		BucketLookup: lookup,
		Transport:    transport,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 client for %s: %w", u.Host, err)
	}
	return &S3Store{client: client, bucket: cfg.Bucket, prefix: strings.Trim(cfg.Prefix, "/")}, nil
}

// object is the bucket's object name of key.
func (s *S3Store) object(key string) string {
	if s.prefix == "" {
		return key
	}
	return s.prefix + "/" + key
}

// Location implements Store: "s3://<bucket>/<prefix>/<key>".
func (s *S3Store) Location(key string) string {
	return "s3://" + path.Join(s.bucket, s.object(key))
}

// Put implements Store. The sha256 in opts is stored as user metadata (SHA256MetadataKey).
func (s *S3Store) Put(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	po := minio.PutObjectOptions{ContentType: opts.ContentType}
	if po.ContentType == "" {
		po.ContentType = "application/octet-stream"
	}
	if opts.SHA256 != "" {
		po.UserMetadata = map[string]string{SHA256MetadataKey: opts.SHA256}
	}
	info, err := s.client.PutObject(ctx, s.bucket, s.object(key), r, size, po)
	if err != nil {
		return "", s.wrap("put", key, err)
	}
	if size >= 0 && info.Size != size {
		// minio-go fails short readers itself; this guards the contract.
		_ = s.client.RemoveObject(context.WithoutCancel(ctx), s.bucket, s.object(key), minio.RemoveObjectOptions{})
		return "", fmt.Errorf("put %s: stored %d bytes, want %d", s.Location(key), info.Size, size)
	}
	return s.Location(key), nil
}

// Get implements Store.
func (s *S3Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	obj, err := s.client.GetObject(ctx, s.bucket, s.object(key), minio.GetObjectOptions{})
	if err != nil {
		return nil, s.wrap("get", key, err)
	}
	// GetObject is lazy: Stat makes the request, so a missing object is reported here.
	if _, err := obj.Stat(); err != nil {
		_ = obj.Close()
		return nil, s.wrap("get", key, err)
	}
	return obj, nil
}

// SHA256Metadata returns the sha256 stored as key's user metadata by Put, "" if it has none.
func (s *S3Store) SHA256Metadata(ctx context.Context, key string) (string, error) {
	info, err := s.client.StatObject(ctx, s.bucket, s.object(key), minio.StatObjectOptions{})
	if err != nil {
		return "", s.wrap("stat", key, err)
	}
	for k, v := range info.UserMetadata {
		if strings.EqualFold(k, SHA256MetadataKey) {
			return v, nil
		}
	}
	return "", nil
}

// Delete implements Store.
func (s *S3Store) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	err := s.client.RemoveObject(ctx, s.bucket, s.object(key), minio.RemoveObjectOptions{})
	if err != nil && !errors.Is(s.wrap("delete", key, err), ErrNotFound) {
		return s.wrap("delete", key, err)
	}
	return nil
}

// List implements Store.
func (s *S3Store) List(ctx context.Context, prefix string) ([]Object, error) {
	full := s.object(prefix)
	if prefix == "" && s.prefix != "" {
		full = s.prefix + "/"
	}
	var out []Object
	for o := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: full, Recursive: true}) {
		if o.Err != nil {
			return nil, s.wrap("list", prefix, o.Err)
		}
		key := o.Key
		if s.prefix != "" {
			key = strings.TrimPrefix(key, s.prefix+"/")
		}
		out = append(out, Object{Key: key, Size: o.Size, LastModified: o.LastModified})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// wrap adds the operation, the location and the package's sentinel errors to a minio-go error.
func (s *S3Store) wrap(op, key string, err error) error {
	var sentinel error
	var resp minio.ErrorResponse
	switch {
	case errors.As(err, &resp):
		switch resp.Code {
		case "NoSuchKey":
			sentinel = ErrNotFound
		case "NoSuchBucket":
			sentinel = ErrBucketNotFound
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "AllAccessDisabled":
			sentinel = ErrAccessDenied
		default:
			if resp.StatusCode == http.StatusForbidden {
				sentinel = ErrAccessDenied
			} else if resp.StatusCode == http.StatusNotFound && resp.Code == "" {
				sentinel = ErrNotFound
			}
		}
	case isCertificateError(err):
		sentinel = ErrUntrustedCertificate
	case isTransportError(err):
		sentinel = ErrUnreachable
	}
	if sentinel != nil {
		return fmt.Errorf("%s %s: %w: %w", op, s.Location(key), sentinel, err)
	}
	return fmt.Errorf("%s %s: %w", op, s.Location(key), err)
}

// isTransportError reports whether err is a failure to talk to the server at all (as opposed to
// an answer from it).
func isTransportError(err error) bool {
	var ue *url.Error
	return errors.As(err, &ue) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// isCertificateError reports whether err is the server's certificate failing verification.
func isCertificateError(err error) bool {
	var verr *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	return errors.As(err, &verr) || errors.As(err, &unknown) || errors.As(err, &host) || errors.As(err, &invalid)
}
