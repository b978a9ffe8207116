package testutil

import (
	"context"
	"sync"
)

// Warnings records the warnings (HTTP 299) the API server returns to one client: set it as the
// client's rest.Config.WarningHandlerWithContext.
type Warnings struct {
	mu  sync.Mutex
	got []string
}

// HandleWarningHeaderWithContext implements rest.WarningHandlerWithContext.
func (w *Warnings) HandleWarningHeaderWithContext(_ context.Context, code int, _ string, text string) {
	if code != 299 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, text)
}

// Take returns the warnings recorded since the last call, oldest first.
func (w *Warnings) Take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	got := w.got
	w.got = nil
	return got
}
