package config

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// DefaultWatchInterval is how often Watcher.Run polls the rules files.
const DefaultWatchInterval = 5 * time.Second

// Watcher reloads the rules at a path when their content changes. It polls (hashing the
// names and contents of the files), which works on every file system, including Kubernetes
// ConfigMap volumes whose files are swapped by symlink. An invalid new config is rejected and
// the previous one stays current. A Watcher is safe for concurrent use.
type Watcher struct {
	path   string
	opts   Options
	apply  func(*Config)
	reject func(error)

	mu      sync.Mutex
	sum     [sha256.Size]byte
	current *Config
}

// NewWatcher loads the rules at path (see Load) and returns a watcher over them. apply is
// called with every new valid Config (not the initial one, which Config returns); reject is
// called with the error of every invalid change. Either may be nil.
func NewWatcher(path string, apply func(*Config), reject func(error)) (*Watcher, error) {
	return NewWatcherWith(path, Options{}, apply, reject)
}

// NewWatcherWith is NewWatcher reading and compiling the rules with options o.
func NewWatcherWith(path string, o Options, apply func(*Config), reject func(error)) (*Watcher, error) {
	w := &Watcher{path: path, opts: o, apply: apply, reject: reject}
	files, sum, err := w.snapshot()
	if err != nil {
		return nil, err
	}
	cfg, err := compileFiles(files, os.ReadFile, o)
	if err != nil {
		return nil, err
	}
	w.sum, w.current = sum, cfg
	return w, nil
}

// Config returns the current (last valid) rules.
func (w *Watcher) Config() *Config {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.current
}

// Reload reloads the rules if the files changed since the last look. It reports whether a
// new config was applied; an invalid change returns its error (and is reported to reject
// once, not at every poll until the files change again).
func (w *Watcher) Reload() (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	files, sum, err := w.snapshot()
	if err == nil && sum == w.sum {
		return false, nil
	}
	w.sum = sum
	var cfg *Config
	if err == nil {
		cfg, err = compileFiles(files, os.ReadFile, w.opts)
	}
	if err != nil {
		err = fmt.Errorf("config: reload of %s rejected, keeping the previous rules: %w", w.path, err)
		if w.reject != nil {
			w.reject(err)
		}
		return false, err
	}
	w.current = cfg
	if w.apply != nil {
		w.apply(cfg)
	}
	return true, nil
}

// Run calls Reload every interval (DefaultWatchInterval when <= 0) until ctx is done.
func (w *Watcher) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultWatchInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = w.Reload()
		}
	}
}

// snapshot lists the rules files and hashes their names and contents. A listing error still
// yields a hash, so a missing file is reported once.
func (w *Watcher) snapshot() ([]string, [sha256.Size]byte, error) {
	h := sha256.New()
	files, err := ruleFiles(w.path, w.opts)
	if err != nil {
		h.Write([]byte(err.Error()))
		var sum [sha256.Size]byte
		copy(sum[:], h.Sum(nil))
		return nil, sum, err
	}
	var errs []error
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("config: %w", err))
		}
		fmt.Fprintf(h, "%s\x00%d\x00", f, len(data))
		h.Write(data)
	}
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return files, sum, errors.Join(errs...)
}
