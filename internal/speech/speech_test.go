package speech

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/internal/g711"
)

// espeakNG is the installed espeak-ng; the test fails without it (scripts/test installs it).
func espeakNG(t *testing.T) Espeak {
	t.Helper()
	p, err := exec.LookPath("espeak-ng")
	if err != nil {
		t.Fatalf("install espeak-ng: apt-get install espeak-ng (%v)", err)
	}
	return Espeak{Path: p}
}

func words(prefix string, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = fmt.Sprintf("%s%d", prefix, i+1)
	}
	return strings.Join(w, " ")
}

// TestSpeak: espeak-ng speech comes out exactly as long as asked, whether espeak-ng's first
// attempt is about right (plain words), far too long (spelt-out letters and numbers, which it
// must be asked again, faster, for), far too short (one word in 300 ms) or more than it can
// make fit (one very long word), with the speech filling most of it and audible; a text
// starting with "-" is spoken, not taken for a flag.
func TestSpeak(t *testing.T) {
	e := espeakNG(t)
	tests := []struct {
		text string
		ms   int
	}{
		{"Started booking your table in the background.", 420},
		{words("w", 30), 1800},
		{"OK.", 300},
		{"-s 80 --version", 300},
		{"I heard: 0 " + strings.Repeat("y", 4000), 300},
		{words("word", 200), 12000},
	}
	for _, tc := range tests {
		start := time.Now()
		audio, err := e.Speak(context.Background(), tc.text, time.Duration(tc.ms)*time.Millisecond)
		took := time.Since(start)
		if err != nil {
			t.Errorf("%.40q: %v", tc.text, err)
			continue
		}
		if len(audio) != tc.ms*8 {
			t.Errorf("%.40q: %d samples, want %d (%d ms)", tc.text, len(audio), tc.ms*8, tc.ms)
		}
		frames, audible, last := 0, 0, 0
		for i := 0; i+g711.SamplesPer20ms <= len(audio); i += g711.SamplesPer20ms {
			frames++
			if g711.RMS(audio[i:i+g711.SamplesPer20ms]) >= 500 {
				audible++
				last = frames
			}
		}
		if audible < 10 || last < frames*8/10 {
			t.Errorf("%.40q: %d of %d frames audible, the last one frame %d: want at least 10, and speech over 80 %% of the time", tc.text, audible, frames, last)
		}
		t.Logf("%.40q: %d ms, %d of %d frames audible, made in %v", tc.text, tc.ms, audible, frames, took.Round(time.Millisecond))
	}
}

// TestSpeakFails: Speak fails, and says why, for nothing to say, a program that is not
// espeak-ng or fails, and a context that ends (espeak-ng is killed).
func TestSpeakFails(t *testing.T) {
	e := espeakNG(t)
	if _, err := e.Speak(context.Background(), " \n", time.Second); err == nil {
		t.Error("no words: no error")
	}
	if _, err := e.Speak(context.Background(), "hello", 0); err == nil {
		t.Error("no time: no error")
	}
	for _, program := range []string{"false", "true", "/nonexistent/espeak-ng"} {
		if _, err := (Espeak{Path: program}).Speak(context.Background(), "hello", time.Second); err == nil {
			t.Errorf("%s: no error", program)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Speak(ctx, words("w", 200), 12*time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("ended context: %v, want context.Canceled", err)
	}
}
