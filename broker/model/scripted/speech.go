package scripted

import (
	"context"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/backchannel-io/backchannel/internal/g711"
	"github.com/backchannel-io/backchannel/internal/speech"
)

// MSPerWord is how long the scripted model speaks each word.
const MSPerWord = 60

// MinSpeechMS is the shortest speech of a response: even "OK." is audible for longer than the
// 200 ms that make a narration delivered (SPEC 8).
const MinSpeechMS = 300

// MaxSpokenWords is the most words the scripted model says of one response (SPEC 2: work per
// frame is bounded): the rest of a longer text is neither spoken nor in its transcript.
const MaxSpokenWords = 200

// maxSpeechBytes bounds the text given to espeak-ng: 200 words can still be long ones.
const maxSpeechBytes = 2048

// maxPending is how many responses may wait for their speech; a response queued behind more
// is the tone, so that a flood of turns costs no more espeak-ng runs than a few.
const maxPending = 8

// SpeechMS is how long the scripted model speaks text, in milliseconds: MSPerWord for each word
// it says (at most MaxSpokenWords), and at least MinSpeechMS. Its audio — speech or tone — is
// exactly that long.
func SpeechMS(text string) int {
	return max(len(strings.Fields(spokenPart(text)))*MSPerWord, MinSpeechMS)
}

// spokenPart is the part of text the scripted model says: up to its first MaxSpokenWords
// words, with the text's own spacing.
func spokenPart(text string) string {
	return firstWords(text, MaxSpokenWords, len(text))
}

// firstWords cuts text after its first n words, or before maxBytes at a word's start (inside
// the first word at a character's start when that word alone is longer), and drops the
// spacing at the cut.
func firstWords(text string, n, maxBytes int) string {
	words, inWord, start := 0, false, 0
	for i, r := range text {
		space := unicode.IsSpace(r)
		switch {
		case !space && !inWord:
			if words == n || i >= maxBytes {
				return strings.TrimRightFunc(text[:i], unicode.IsSpace)
			}
			words++
			inWord, start = true, i
		case space && inWord:
			inWord = false
		}
		if !space && i+utf8.RuneLen(r) > maxBytes {
			if words > 1 {
				return strings.TrimRightFunc(text[:start], unicode.IsSpace)
			}
			return text[:i]
		}
	}
	return text
}

// espeak is the path of espeak-ng, looked up once when a scripted model first speaks; "" when
// it is not installed.
var espeak = sync.OnceValue(func() string { return lookPath("espeak-ng") })

// lookPath finds a speech program; when it is not installed, the log says once (per process)
// that the scripted model speaks a tone instead.
func lookPath(name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		missingOnce.Do(func() {
			slog.Warn("scripted model: "+name+" is not installed (apt-get install espeak-ng): its speech is a 440 Hz tone", "err", err)
		})
		return ""
	}
	return p
}

// The fallback to the tone is logged once per process, for each reason.
var (
	missingOnce sync.Once // espeak-ng is not installed
	failedOnce  sync.Once // espeak-ng failed
	behindOnce  sync.Once // responses were queued faster than espeak-ng spoke them
)

// tone is the fallback audio of a response of ms milliseconds: a 440 Hz sine. 440 Hz makes
// exactly 22 cycles in 50 ms, so the tone is its first 50 ms over and over: copied, not a sine
// computed per sample on the session's loop (it is made there: start).
func tone(ms int) []byte {
	out := make([]byte, ms*8)
	for i := 0; i < len(out); {
		i += copy(out[i:], toneCycle)
	}
	return out
}

// toneCycle is the first 50 ms of the tone.
var toneCycle = g711.Tone(440, 50, 0.3)

// response is one response of the scripted model whose audio and end are still to be
// reported.
type response struct {
	id    string
	text  string // what it says (the transcript): at most MaxSpokenWords words
	muted bool   // no audio and no transcript
	// Set under the model's lock:
	tone      bool // the tone even with espeak-ng (it was queued behind too many)
	cancelled bool // cancelled (barge-in) before its audio was reported
}

// produce makes a response's audio: espeak-ng speech, or the tone when espeak-ng is not
// installed or fails. It reports false when the response was cancelled (by Cancel, or by
// Close or the model's context) before its speech was made.
func (m *Model) produce(ctx context.Context, r *response) ([]byte, bool) {
	ms := SpeechMS(r.text)
	path := m.program()
	if path == "" || r.tone || strings.TrimSpace(r.text) == "" {
		return tone(ms), true
	}
	audio, err := speech.Espeak{Path: path}.Speak(ctx, firstWords(r.text, MaxSpokenWords, maxSpeechBytes), time.Duration(ms)*time.Millisecond)
	if ctx.Err() != nil {
		return nil, false
	}
	if err != nil {
		failedOnce.Do(func() {
			slog.Warn("scripted model: espeak-ng failed: this response (and any other it fails for) is a 440 Hz tone", "err", err)
		})
		return tone(ms), true
	}
	return audio, true
}

// report tells the events the rest of a response: its audio (unless muted or cancelled), then
// its end.
func (m *Model) report(r *response, audio []byte, cancelled bool) {
	if !r.muted && !cancelled {
		m.events.Audio(r.id, audio)
	}
	m.events.ResponseDone(r.id, cancelled, nil)
}

// start reports a new response and its transcript (unless muted) at once, as the scripted
// model always did, and has its audio made: at once too when that is cheap (muted, or the
// tone) and nothing waits before it, else by the speech worker, in order. The caller (the
// session's loop) never waits for espeak-ng.
func (m *Model) start(r *response) {
	m.events.ResponseStarted(r.id)
	if !r.muted {
		m.events.Transcript(r.id, r.text, true)
	}
	needsSpeech := !r.muted && m.program() != ""
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	if !needsSpeech && !m.working {
		m.mu.Unlock()
		var audio []byte
		if !r.muted {
			audio = tone(SpeechMS(r.text))
		}
		m.report(r, audio, false)
		return
	}
	if needsSpeech && len(m.pending) >= maxPending {
		r.tone = true
		behindOnce.Do(func() {
			slog.Warn("scripted model: responses come faster than espeak-ng speaks them: the ones behind are a 440 Hz tone")
		})
	}
	m.pending = append(m.pending, r)
	if !m.working {
		m.working = true
		m.wg.Add(1)
		go m.work()
	}
	m.mu.Unlock()
}

// work makes and reports the speech of the pending responses, one at a time and in order,
// until none is left or the model is stopped; it runs only while there is work.
func (m *Model) work() {
	defer m.wg.Done()
	for {
		m.mu.Lock()
		if m.closed || len(m.pending) == 0 {
			m.working = false
			m.mu.Unlock()
			return
		}
		r := m.pending[0]
		m.pending[0] = nil
		m.pending = m.pending[1:]
		skip := r.muted || r.cancelled
		ctx, abort := context.WithCancel(m.ctx)
		m.current, m.abort = r, abort
		m.mu.Unlock()

		var audio []byte
		made := true
		if !skip {
			audio, made = m.produce(ctx, r)
		}
		abort()

		m.mu.Lock()
		m.current, m.abort = nil, nil
		cancelled := r.cancelled || !made
		stop := m.closed || m.ctx.Err() != nil
		if stop {
			m.working = false
		}
		m.mu.Unlock()
		if stop {
			return
		}
		m.report(r, audio, cancelled)
	}
}

// cancel stops the making of a response's speech (barge-in): the response ends cancelled,
// without audio, as soon as espeak-ng is stopped. A response already reported is
// not changed.
func (m *Model) cancel(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.current != nil && m.current.id == id {
		m.current.cancelled = true
		m.abort()
		return
	}
	for _, r := range m.pending {
		if r.id == id {
			r.cancelled = true
		}
	}
}
