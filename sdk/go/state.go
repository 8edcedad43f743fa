package backchannel

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// savedState is the content of Options.StateFile (SPEC 10).
type savedState struct {
	SessionID   string `json:"session_id"`
	ResumeToken string `json:"resume_token"`
	LastSeq     int64  `json:"last_seq"`
	// JoinToken is kept so that Host.JoinToken still answers after a restart.
	JoinToken string `json:"join_token,omitempty"`
}

// State file write policy: after every welcome, and once stateEvery frames arrived or
// stateDelay passed since the first unsaved one.
const (
	stateEvery = 32
	stateDelay = time.Second
)

// stateFile writes a host's savedState atomically (temp file + rename), serialized.
type stateFile struct {
	path     string
	snapshot func() savedState

	mu      sync.Mutex
	dirty   int
	timer   *time.Timer
	removed bool
	closed  bool
	lastErr error
}

// loadState reads a state file; ok is false when it does not exist.
func loadState(path string) (st savedState, ok bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return savedState{}, false, nil
	}
	if err != nil {
		return savedState{}, false, fmt.Errorf("backchannel: reading Options.StateFile: %w", err)
	}
	if err := json.Unmarshal(data, &st); err != nil || st.SessionID == "" || st.ResumeToken == "" {
		return savedState{}, false, fmt.Errorf("backchannel: Options.StateFile %s is not a state file of this SDK; remove it to start a new session", path)
	}
	return st, true, nil
}

// touch records one more processed frame and saves when the policy says so.
func (s *stateFile) touch() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.dirty++
	now := s.dirty >= stateEvery
	if !now && s.timer == nil && !s.closed {
		s.timer = time.AfterFunc(stateDelay, func() { s.save() })
	}
	s.mu.Unlock()
	if now {
		s.save()
	}
}

// save writes the current state now.
func (s *stateFile) save() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if s.removed || s.closed {
		return // a timer that fired late must not write after the end
	}
	s.dirty = 0
	s.lastErr = writeAtomic(s.path, s.snapshot())
}

// finish stops the timer; with remove the file is deleted (the slot is gone for good),
// otherwise it is saved one last time.
func (s *stateFile) finish(remove bool) error {
	if s == nil {
		return nil
	}
	if !remove {
		s.save()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.lastErr
	}
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if remove && !s.removed {
		s.removed = true
		if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("backchannel: removing Options.StateFile: %w", err)
		}
	}
	return s.lastErr
}

// writeAtomic writes st to path through a temporary file in the same directory and a rename,
// so a crash leaves the old file or the new one, never a mix.
func writeAtomic(path string, st savedState) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("backchannel: writing Options.StateFile: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("backchannel: writing Options.StateFile: %w", err)
	}
	return nil
}
