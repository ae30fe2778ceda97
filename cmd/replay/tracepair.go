package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/twinccl/twinccl/traces"
)

// tracePair writes a call trace and its event trace to temporary files
// beside their final paths; commit closes both, syncs them and renames
// them into place, abort removes them. A run that fails or is killed
// leaves the previous pair untouched (and, once cleaned, no temporary
// file): never an empty calls file or an events file without its footer,
// never one new file beside an old one.
type tracePair struct {
	callPath, eventPath string
	callTmp, eventTmp   *os.File
	Calls               *traces.CallWriter
	Events              *traces.EventWriter
	closed              bool
}

// createTracePair opens the two temporary files and their writers.
func createTracePair(callPath, eventPath string, opt traces.WriterOptions) (_ *tracePair, err error) {
	p := &tracePair{callPath: callPath, eventPath: eventPath}
	defer func() {
		if err != nil {
			p.abort()
		}
	}()
	tmp := func(path string) (*os.File, error) {
		f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return f, nil
	}
	if p.callTmp, err = tmp(callPath); err != nil {
		return nil, err
	}
	if p.eventTmp, err = tmp(eventPath); err != nil {
		return nil, err
	}
	if p.Calls, err = traces.NewCallWriter(p.callTmp, opt); err != nil {
		return nil, fmt.Errorf("%s: %w", callPath, err)
	}
	if p.Events, err = traces.NewEventWriter(p.eventTmp, opt); err != nil {
		return nil, fmt.Errorf("%s: %w", eventPath, err)
	}
	return p, nil
}

// commit finishes both traces (footers), syncs them and renames them over
// the final paths, events first so that a calls file is never newer than
// the events beside it. On error nothing is renamed and the temporary
// files are removed.
func (p *tracePair) commit() (err error) {
	if p.closed {
		return errors.New("trace pair already closed")
	}
	defer func() {
		if err != nil {
			p.abort()
		}
	}()
	finish := func(f *os.File, path string, closeWriter func() error) error {
		if err := closeWriter(); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := f.Chmod(0o644); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	}
	if err := finish(p.eventTmp, p.eventPath, p.Events.Close); err != nil {
		return err
	}
	if err := finish(p.callTmp, p.callPath, p.Calls.Close); err != nil {
		return err
	}
	p.Events, p.Calls = nil, nil
	if err := errors.Join(p.eventTmp.Close(), p.callTmp.Close()); err != nil {
		return fmt.Errorf("%s: %w", p.callPath, err)
	}
	if err := os.Rename(p.eventTmp.Name(), p.eventPath); err != nil {
		return fmt.Errorf("%s: %w", p.eventPath, err)
	}
	if err := os.Rename(p.callTmp.Name(), p.callPath); err != nil {
		os.Remove(p.eventPath) // no events file without its calls
		return fmt.Errorf("%s: %w", p.callPath, err)
	}
	p.closed = true
	return nil
}

// abort closes the writers and removes the temporary files; after commit
// it does nothing.
func (p *tracePair) abort() {
	if p.closed {
		return
	}
	p.closed = true
	if p.Events != nil {
		p.Events.Close()
	}
	if p.Calls != nil {
		p.Calls.Close()
	}
	for _, f := range []*os.File{p.eventTmp, p.callTmp} {
		if f != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}
}
