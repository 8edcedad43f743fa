package scripted_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/broker/model/scripted"
	"github.com/backchannel-io/backchannel/internal/g711"
	"github.com/backchannel-io/backchannel/narration"
)

// say has the model voice text as an inject and waits for the response to end; it returns the
// response's id.
func say(t *testing.T, m *scripted.Model, rec *recorder, text string) string {
	t.Helper()
	id, err := m.Respond(model.Request{Kind: model.Inject, Text: text})
	if err != nil {
		t.Fatal(err)
	}
	rec.settle(t)
	return id
}

// shareNear is the share of the energy of µ-law audio at frequencies within bw Hz of f, by the
// discrete Fourier transform of the whole clip (bins 8000/len Hz apart; the energy of a bin
// and its mirror image, over the clip's energy by Parseval's theorem).
func shareNear(audio []byte, f, bw float64) float64 {
	n := len(audio)
	x := make([]float64, n)
	var total float64
	for i, b := range audio {
		x[i] = float64(g711.Decode(b))
		total += x[i] * x[i]
	}
	if total == 0 {
		return 0
	}
	var band float64
	for k := 1; k < (n+1)/2; k++ {
		if math.Abs(float64(k)*8000/float64(n)-f) > bw {
			continue
		}
		var re, im float64
		for i, v := range x {
			a := 2 * math.Pi * float64(k) * float64(i) / float64(n)
			re += v * math.Cos(a)
			im -= v * math.Sin(a)
		}
		band += 2 * (re*re + im*im)
	}
	return band / (float64(n) * total)
}

// brightness is the energy of the audio's first difference over its own: 4·sin²(π·f/8000) for
// a sine of f Hz (0.12 at 440 Hz), more for audio with more energy at high frequencies —
// speech's upper formants and hiss.
func brightness(audio []byte) float64 {
	var e, d float64
	prev := 0.0
	for _, b := range audio {
		x := float64(g711.Decode(b))
		e += x * x
		d += (x - prev) * (x - prev)
		prev = x
	}
	if e == 0 {
		return 0
	}
	return d / e
}

// frameRMS is the RMS of each 20 ms frame.
func frameRMS(audio []byte) []float64 {
	var out []float64
	for i := 0; i+g711.SamplesPer20ms <= len(audio); i += g711.SamplesPer20ms {
		out = append(out, g711.RMS(audio[i:i+g711.SamplesPer20ms]))
	}
	return out
}

// voiced is the frames from the first to the last audible one (SPEC 8's threshold).
func voiced(rms []float64) []float64 {
	first := slices.IndexFunc(rms, func(v float64) bool { return v >= narration.AudibleRMS })
	if first < 0 {
		return nil
	}
	last := len(rms) - 1
	for rms[last] < narration.AudibleRMS {
		last--
	}
	return rms[first : last+1]
}

// dips counts the frames of voiced audio quieter than half its median frame: the gaps between
// syllables and words that speech has and a tone does not.
func dips(v []float64) int {
	if len(v) == 0 {
		return 0
	}
	sorted := slices.Sorted(slices.Values(v))
	median := sorted[len(sorted)/2]
	n := 0
	for _, x := range v {
		if x < median/2 {
			n++
		}
	}
	return n
}

// TestSpeechIsSpeech: with espeak-ng installed the scripted model's audio is speech (SPEC 19),
// not the tone: almost none of its energy is near 440 Hz (the tone's is nearly all there, the
// control), its loudness rises and falls with syllables and words, it is audible for longer
// than a narration needs (SPEC 8), and its duration follows the text — 60 ms a word, at least
// 300 ms, the speech itself filling most of it — so a 20-word sentence lasts four times as
// long as a 3-word one and is heard for most of that.
func TestSpeechIsSpeech(t *testing.T) {
	texts := []string{
		"Thanks, all done.", // 3 words: 300 ms
		"The backup of your photos finished a minute ago, and every one of the two thousand files was saved safely.", // 20 words: 1200 ms
	}
	m, rec := startWith(t, "espeak-ng")
	tm, trec := startWith(t, "tone")
	var spans []int
	for _, text := range texts {
		ms := scripted.SpeechMS(text)
		audio := rec.audioOf(say(t, m, rec, text))
		tone := trec.audioOf(say(t, tm, trec, text))
		if len(audio) != ms*8 || len(tone) != ms*8 {
			t.Fatalf("%q: %d bytes of speech and %d of tone, want %d (%d ms)", text, len(audio), len(tone), ms*8, ms)
		}

		speech440, tone440 := shareNear(audio, 440, 20), shareNear(tone, 440, 20)
		if speech440 > 0.25 {
			t.Errorf("%q: %.1f %% of the speech's energy is within 20 Hz of 440 Hz: a tone, not speech", text, 100*speech440)
		}
		if tone440 < 0.9 {
			t.Errorf("%q: the tone (control) has only %.1f %% of its energy within 20 Hz of 440 Hz", text, 100*tone440)
		}

		if b, tb := brightness(audio), brightness(tone); b < 2*tb {
			t.Errorf("%q: the speech is no brighter than the tone (first-difference energy %.3f against %.3f): speech has high frequencies a tone lacks", text, b, tb)
		}

		rms := frameRMS(audio)
		v := voiced(rms)
		p := playout(audio)
		if !p.Delivered(false) {
			t.Errorf("%q: %d audible frames, want at least %d", text, p.Audible, narration.AudibleFrames)
		}
		// The speech fills the response: a duration that follows the text.
		if len(v) < len(rms)*8/10 {
			t.Errorf("%q: speech over %d of its %d frames, want at least 80 %%", text, len(v), len(rms))
		}
		wantDips := 1 + len(v)/15 // a dip every 300 ms at least
		if d, td := dips(v), dips(voiced(frameRMS(tone))); d < wantDips || td != 0 {
			t.Errorf("%q: %d quiet frames between loud ones in the speech (want at least %d), %d in the tone (want 0)", text, d, wantDips, td)
		}
		spans = append(spans, len(v))
		t.Logf("%q: %d ms, %.2f %% near 440 Hz (tone %.1f %%), brightness %.2f (tone %.2f), speech over %d of %d frames, %d audible, %d dips; frame RMS %v",
			text, ms, 100*speech440, 100*tone440, brightness(audio), brightness(tone), len(v), len(rms), p.Audible, dips(v), roundAll(rms))
	}
	if spans[1] < 3*spans[0] {
		t.Errorf("20 words spoken over %d frames, 3 words over %d: want at least 3 times as long (1200 ms against 300 ms)", spans[1], spans[0])
	}
}

func roundAll(v []float64) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// TestToneFallback: without espeak-ng, or when it fails for a text, the scripted model's audio
// is the 440 Hz tone exactly as before speech (SPEC 19: audible either way), of the same length,
// with the same events.
func TestToneFallback(t *testing.T) {
	for _, voice := range []string{"tone", "failing"} {
		t.Run(voice, func(t *testing.T) {
			m, rec := startWith(t, voice)
			for _, text := range []string{"OK.", "Started booking your table in the background.", words("w", 30)} {
				id := say(t, m, rec, text)
				if got := rec.take(); got != spoken(text) {
					t.Fatalf("%q: %s, want %s", text, got, spoken(text))
				}
				ms := max(len(strings.Fields(text))*scripted.MSPerWord, scripted.MinSpeechMS)
				if got, want := rec.audioOf(id), g711.Tone(440, ms, 0.3); string(got) != string(want) {
					t.Fatalf("%q: %d bytes of audio that are not the %d ms 440 Hz tone", text, len(got), ms)
				}
			}
		})
	}
}

// words returns n distinct words.
func words(prefix string, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = fmt.Sprintf("%s%d", prefix, i+1)
	}
	return strings.Join(w, " ")
}

// TestWordCap: the scripted model speaks at most 200 words of one response (SPEC 2: bounded
// work), speech or tone: 12 s of audio, and a transcript of those 200 words.
func TestWordCap(t *testing.T) {
	text := words("word", 250)
	want := words("word", scripted.MaxSpokenWords)
	if got := scripted.SpeechMS(text); got != scripted.MaxSpokenWords*scripted.MSPerWord {
		t.Fatalf("SpeechMS of 250 words: %d, want %d", got, scripted.MaxSpokenWords*scripted.MSPerWord)
	}
	for _, voice := range []string{"espeak-ng", "tone"} {
		t.Run(voice, func(t *testing.T) {
			m, rec := startWith(t, voice)
			id := say(t, m, rec, text)
			if got := rec.take(); got != spoken(want) {
				t.Errorf("250 words: %.200s…, want the first 200 words said", got)
			}
			if got := len(rec.audioOf(id)); got != scripted.MaxSpokenWords*scripted.MSPerWord*8 {
				t.Errorf("250 words: %d bytes of audio, want %d (12 s)", got, scripted.MaxSpokenWords*scripted.MSPerWord*8)
			}
		})
	}
}

// TestFirstWords pins where the scripted model cuts a text: after its first n words (keeping
// the text's own spacing before them), or within a byte budget at a word's start, or inside a
// first word longer than the budget at a character's start.
func TestFirstWords(t *testing.T) {
	tests := []struct {
		text     string
		n, bytes int
		want     string
	}{
		{"one two three", 2, 100, "one two"},
		{"one  two\nthree ", 3, 100, "one  two\nthree "},
		{"  one two", 1, 100, "  one"},
		{"one two three", 5, 9, "one two"},
		{"one two three", 5, 7, "one two"},
		{"one two three", 5, 6, "one"},
		{"abcdefgh ij", 5, 4, "abcd"},
		{"  abcdefgh", 5, 4, "  ab"},
		{"ééé", 5, 3, "é"},
		{"", 5, 5, ""},
	}
	for _, tc := range tests {
		if got := scripted.FirstWords(tc.text, tc.n, tc.bytes); got != tc.want {
			t.Errorf("FirstWords(%q, %d, %d) = %q, want %q", tc.text, tc.n, tc.bytes, got, tc.want)
		}
	}
}

// TestEventOrder: responses asked for back to back, speech or muted, each report started,
// transcript, audio, done in that order — started and transcript before the call that asked
// for the response returns — and they end in the order they started; `mute N` still silences
// exactly the next N responses.
func TestEventOrder(t *testing.T) {
	m, rec := startWith(t, "espeak-ng")
	var ids []string
	respond := func(text string) {
		id, err := m.Respond(model.Request{Kind: model.Inject, Text: text})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	respond(words("first", 20))
	rec.mu.Lock()
	atOnce := slices.Clone(rec.events[ids[0]])
	rec.mu.Unlock()
	if len(atOnce) < 2 || atOnce[0] != "started" || atOnce[1] != "says" {
		t.Errorf("when Respond returned: events %v, want started and the transcript at once (the broker and the simulator's tests count on it)", atOnce)
	}
	respond("second")
	m.CallerTurn("mute 2", nil)
	respond("muted one")
	m.CallerTurn("say muted two", nil)
	m.ToolResult("unknown", "third", false, true)
	rec.settle(t)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.ended) != 5 {
		t.Fatalf("%d responses ended, want 5", len(rec.ended))
	}
	ids = append(ids[:3], "sc_resp_4", "sc_resp_5")
	if !slices.Equal(rec.ended, ids) {
		t.Errorf("responses ended in the order %v, want %v", rec.ended, ids)
	}
	for i, id := range rec.ended {
		want := []string{"started", "says", "audio", "done"}
		if i == 2 || i == 3 {
			want = []string{"started", "done"}
		}
		if got := rec.events[id]; !slices.Equal(got, want) {
			t.Errorf("response %s: events %v, want %v", id, got, want)
		}
	}
}

// TestCancelStopsSpeech: a barge-in (Cancel) on a response whose speech is still being made
// (or waits to be) stops espeak-ng and ends the response cancelled at once, with no audio; the
// model goes on speaking.
func TestCancelStopsSpeech(t *testing.T) {
	m, rec := startWith(t, "espeak-ng")
	long := words("w", scripted.MaxSpokenWords) // its speech takes espeak-ng a good part of a second
	first, _ := m.Respond(model.Request{Kind: model.Inject, Text: long})
	second, _ := m.Respond(model.Request{Kind: model.Inject, Text: long}) // waits behind the first
	m.Cancel(second)
	m.Cancel(first)
	rec.settle(t)
	said := "started | says " + long
	if got, want := rec.take(), said+" | "+said+" | done cancelled=true err=<nil> | done cancelled=true err=<nil>"; got != want {
		t.Fatalf("two cancelled responses: %s, want %s", got, want)
	}
	m.Cancel(first) // again, and after its end: nothing happens
	say(t, m, rec, "still here")
	if got := rec.take(); got != spoken("still here") {
		t.Fatalf("after the cancel: %s, want %s", got, spoken("still here"))
	}
}

// TestStopDuringSpeech: Close, or the end of the model's context, while speech is being made
// stops espeak-ng; no event follows (no audio, no end), and no goroutine is left (TestMain
// checks).
func TestStopDuringSpeech(t *testing.T) {
	long := words("w", scripted.MaxSpokenWords)
	t.Run("close", func(t *testing.T) {
		m, rec := startWith(t, "espeak-ng")
		_, _ = m.Respond(model.Request{Kind: model.Inject, Text: long})
		_, _ = m.Respond(model.Request{Kind: model.Inject, Text: "queued"})
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if got, want := rec.take(), "started | says "+long+" | started | says queued"; got != want {
			t.Fatalf("Close while speaking: %.300s…, want the two starts and transcripts only", got)
		}
	})
	t.Run("context", func(t *testing.T) {
		needEspeak(t)
		ctx, cancel := context.WithCancel(context.Background())
		rec := &recorder{}
		m := scripted.NewWithProgram(ctx, rec, "espeak-ng")
		_, _ = m.Respond(model.Request{Kind: model.Inject, Text: long})
		cancel()
		_, _ = m.Respond(model.Request{Kind: model.Inject, Text: "after the end"})
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if got, want := rec.take(), "started | says "+long; got != want {
			t.Fatalf("context ended while speaking: %.300s…, want the start and transcript only", got)
		}
	})
}

// TestOneMebibyteTurn: one caller turn of about 1 MiB (the frame limit) costs the scripted model
// at most a small multiple of its own size in memory and 12 s of audio, speech or tone (SPEC 2;
// issue 15: it once built 250 MB of audio for such a turn).
func TestOneMebibyteTurn(t *testing.T) {
	text := strings.Repeat("lorem ipsum ", (1<<20)/len("lorem ipsum "))
	for _, voice := range []string{"espeak-ng", "tone"} {
		t.Run(voice, func(t *testing.T) {
			m, rec := startWith(t, voice)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			m.CallerTurn("say "+text, nil)
			rec.settle(t)
			runtime.ReadMemStats(&after)
			var audio int
			rec.mu.Lock()
			for _, a := range rec.audio {
				audio += len(a)
			}
			rec.mu.Unlock()
			if max := scripted.MaxSpokenWords * scripted.MSPerWord * 8; audio > max {
				t.Errorf("%d bytes of audio for one turn, want at most %d (12 s)", audio, max)
			}
			// The test's own copies of the turn (the "say " string) count too; the model's part
			// must stay within a few times the turn's size.
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("one turn of %d bytes: %d bytes of audio, %d bytes allocated", len(text), audio, alloc)
			if alloc > 16*uint64(len(text)) {
				t.Errorf("one turn of %d bytes allocated %d bytes, want at most 16×", len(text), alloc)
			}
		})
	}
}

// TestToneIsTheSine: the tone made of repeated 50 ms cycles is the sine g711.Tone computes.
func TestToneIsTheSine(t *testing.T) {
	for _, ms := range []int{0, 20, 50, 60, 300, 1234, scripted.MaxSpokenWords * scripted.MSPerWord} {
		if got, want := scripted.Tone(ms), g711.Tone(440, ms, 0.3); !bytes.Equal(got, want) {
			t.Errorf("tone(%d) differs from g711.Tone", ms)
		}
	}
}
