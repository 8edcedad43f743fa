package scripted

import (
	"context"
	"sync"

	"github.com/backchannel-io/backchannel/broker/model"
)

// NewWithProgram is New with the speech program found as program on PATH (once, when the
// model first speaks) instead of espeak-ng: one that is not installed, or that fails, makes
// the model speak the tone.
func NewWithProgram(ctx context.Context, events model.Events, program string) *Model {
	return newModel(ctx, events, sync.OnceValue(func() string { return lookPath(program) }))
}

// Tone is tone, for its test.
var Tone = tone

// FirstWords is firstWords, for its test.
var FirstWords = firstWords
