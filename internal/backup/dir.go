package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// DirStore keeps objects as files under a root directory, e.g. a mounted PersistentVolumeClaim:
// key "ns/c/b.db" is the file <root>/ns/c/b.db. Writes go to a temporary file in the target's
// directory (".<name>.tmp-<random>"), which is fsynced and renamed over the target, and the
// directory is fsynced: a reader sees either the old or the complete new object, also after a crash.
// Temporary files are never listed.
type DirStore struct {
	root string
}

var _ Store = (*DirStore)(nil)

// NewDirStore returns a store rooted at dir, which must be an existing directory.
func NewDirStore(dir string) (*DirStore, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("backup directory %q: %w", dir, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("backup directory: %w", dirErr(err))
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("backup directory %s is not a directory", abs)
	}
	return &DirStore{root: abs}, nil
}

// Location implements Store: "file://<root>/<key>".
func (s *DirStore) Location(key string) string {
	return "file://" + s.path(key)
}

func (s *DirStore) path(key string) string {
	return filepath.Join(s.root, filepath.FromSlash(key))
}

// Put implements Store.
func (s *DirStore) Put(ctx context.Context, key string, r io.Reader, size int64, _ PutOptions) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	dst := s.path(key)
	dir := filepath.Dir(dst)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("put %s: %w", dst, dirErr(err))
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("put %s: %w", dst, dirErr(err))
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	var src io.Reader = ctxReader{ctx, r}
	if file, ok := r.(*os.File); ok && ctx.Err() == nil {
		// A local file: let the kernel copy it (copy_file_range), without a pass through user space.
		src = file
	}
	n, err := io.Copy(f, src)
	if err != nil {
		return "", fmt.Errorf("put %s: write: %w", dst, dirErr(err))
	}
	if size >= 0 && n != size {
		return "", fmt.Errorf("put %s: got %d bytes, want %d", dst, n, size)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("put %s: fsync: %w", dst, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("put %s: close: %w", dst, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return "", fmt.Errorf("put %s: %w", dst, dirErr(err))
	}
	ok = true
	if err := syncDir(dir); err != nil {
		return "", fmt.Errorf("put %s: fsync directory: %w", dst, err)
	}
	return s.Location(key), nil
}

// Get implements Store.
func (s *DirStore) Get(_ context.Context, key string) (io.ReadCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	f, err := os.Open(s.path(key))
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", s.path(key), dirErr(err))
	}
	return f, nil
}

// Delete implements Store.
func (s *DirStore) Delete(_ context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := os.Remove(s.path(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", s.path(key), dirErr(err))
	}
	return nil
}

// List implements Store.
func (s *DirStore) List(_ context.Context, prefix string) ([]Object, error) {
	// Walk only the directory the prefix's complete elements name.
	start := s.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		if err := checkKey(prefix[:i]); err != nil {
			return nil, err
		}
		start = s.path(prefix[:i])
	}
	var out []Object
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipDir
			}
			return err
		}
		if d.IsDir() || isTempName(d.Name()) {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, Object{Key: key, Size: info.Size(), LastModified: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", path.Join(s.root, prefix), dirErr(err))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// isTempName reports whether a file name is one of Put's temporary files.
func isTempName(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-")
}

// dirErr adds the package's sentinel errors to file system errors.
func dirErr(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%w: %w", ErrAccessDenied, err)
	}
	return err
}

// syncDir fsyncs a directory, making a rename in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ctxReader fails reads once ctx has ended, so that copies stop at the caller's deadline.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
