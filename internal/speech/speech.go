// Package speech makes the scripted model's speech (SPEC 19): text spoken by the espeak-ng
// program, resampled from espeak-ng's rate to 8 kHz by a windowed-sinc resampler and fitted to
// an exact length of G.711 µ-law audio. It runs espeak-ng as a subprocess and is written in
// plain Go otherwise.
package speech

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/backchannel-io/backchannel/internal/g711"
)

// Rate is the sample rate of the audio Speak makes (G.711: 8 kHz).
const Rate = 8000

// How Speak fits speech to its length.
const (
	// fill is the share of the length the speech itself is aimed at: the rest is room for
	// espeak-ng's rate not being exact, and trailing silence.
	fill = 0.95
	// minFill is the share below which speech is synthesized again at a slower rate.
	minFill = 0.85
	// maxSpeedUp is the most Speak plays speech faster than espeak-ng made it, to fit it in
	// (its pitch rises as much); speech still longer is cut, with a short fade.
	maxSpeedUp = 1.5
	// minWPM and maxWPM bound the rates asked of espeak-ng (its slowest rate is 80 words per
	// minute; above about 9500 it makes no sound).
	minWPM = 80
	maxWPM = 8000
	// margin is how much audio is kept before the first and after the last loud sample, so
	// that a word's onset and decay are not cut.
	margin = 5 * time.Millisecond
	// fade is the fade-out of speech cut at its length.
	fade = 10 * time.Millisecond
	// peak is the level speech is normalized to (of full scale): well above the 500 RMS that
	// make a frame audible (SPEC 8), with headroom.
	peak = 0.7
	// maxGain bounds the normalization, so that a near-silent result stays near silent.
	maxGain = 16
	// The compressor that lifts quiet sounds (consonants, the ends of words) towards the level
	// of vowels, so that most 20 ms frames of speech are audible by SPEC 8's threshold while
	// pauses stay quiet: over each block its gain is level/RMS, at least 1 and at most
	// maxBoost, fading back to 1 below floor.
	block    = 80   // samples (10 ms at 8 kHz)
	level    = 0.1  // of full scale (about 3300 RMS)
	maxBoost = 4    // 12 dB
	floor    = 0.01 // of full scale (about 330 RMS)
)

// Espeak speaks with the espeak-ng program.
type Espeak struct {
	// Path is the program (from exec.LookPath).
	Path string
}

// Speak returns text spoken by espeak-ng in exactly d of G.711 µ-law audio at 8 kHz (d is
// rounded down to whole samples): the speech is aimed at about 90 % of d — espeak-ng is asked
// for the rate that makes it so, and asked again at a corrected rate when the first result is
// too long or much too short — then resampled to 8 kHz (played up to 1.5 times faster when it
// is still too long, and cut with a short fade when even that does not fit), normalized and
// padded with silence to d. Cancelling ctx kills espeak-ng. It fails when espeak-ng fails,
// writes no valid WAV, or makes no sound.
func (e Espeak) Speak(ctx context.Context, text string, d time.Duration) ([]byte, error) {
	words := len(strings.Fields(text))
	n := int(d.Seconds() * Rate)
	if words == 0 || n <= 0 {
		return nil, errors.New("speech: nothing to say")
	}
	aim := d.Seconds() * fill
	wpm := clampWPM(float64(words) * 60 / aim)
	// Audio past maxSpeedUp·d is cut anyway: the rest of a longer stream is only measured.
	keep := time.Duration(float64(d)*maxSpeedUp) + time.Second
	clip, err := e.synthesize(ctx, text, wpm, keep)
	if err != nil {
		return nil, err
	}
	if loud := clip.Loud().Seconds(); loud > d.Seconds() || loud < minFill*d.Seconds() {
		if next := clampWPM(float64(wpm) * loud / aim); next != wpm {
			if clip, err = e.synthesize(ctx, text, next, keep); err != nil {
				return nil, err
			}
		}
	}
	return fit(clip, n), nil
}

// clampWPM rounds a rate to the words per minute espeak-ng can be asked for.
func clampWPM(wpm float64) int {
	return int(math.Round(min(max(wpm, minWPM), maxWPM)))
}

// synthesize runs espeak-ng once: text on its standard input, a WAV on its standard output.
func (e Espeak) synthesize(ctx context.Context, text string, wpm int, keep time.Duration) (*Clip, error) {
	// The text goes on standard input, never as an argument: text starting with "-" is no flag.
	cmd := exec.CommandContext(ctx, e.Path, "--stdin", "--stdout", "-z", "-s", strconv.Itoa(wpm))
	cmd.Stdin = strings.NewReader(text)
	var stderr tail
	cmd.Stderr = &stderr
	cmd.WaitDelay = time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("speech: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("speech: starting espeak-ng: %w", err)
	}
	clip, rerr := ReadWAV(out, keep)
	if rerr != nil {
		_ = cmd.Process.Kill() // it may be blocked writing what is no longer read
	}
	werr := cmd.Wait()
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case werr != nil:
		return nil, fmt.Errorf("speech: espeak-ng: %w%s", werr, stderr.suffix())
	case rerr != nil:
		return nil, fmt.Errorf("speech: espeak-ng's output: %w%s", rerr, stderr.suffix())
	case clip.End == 0:
		return nil, fmt.Errorf("speech: espeak-ng made no sound at %d words per minute%s", wpm, stderr.suffix())
	}
	return clip, nil
}

// fit turns the loud part of a clip into exactly n samples of µ-law at 8 kHz (see Speak).
func fit(c *Clip, n int) []byte {
	pad := int(margin.Seconds() * float64(c.Rate))
	lo := max(0, c.First-pad)
	hi := min(len(c.Samples), c.End+pad)
	in := make([]float64, max(0, hi-lo))
	for i := range in {
		in[i] = float64(c.Samples[lo+i]) / 32768
	}
	// At the natural speed the loud part would take this many output samples.
	natural := float64(c.End-c.First+2*pad) * Rate / float64(c.Rate)
	speed := min(max(1, natural/float64(n)), maxSpeedUp)
	pcm := Resample(in, float64(c.Rate)*speed, Rate)
	if len(pcm) > n {
		pcm = pcm[:n]
		f := min(n, int(fade.Seconds()*Rate))
		for i := range f {
			pcm[n-f+i] *= float64(f-i) / float64(f)
		}
	}
	top := 0.0
	for _, v := range pcm {
		top = max(top, math.Abs(v))
	}
	gain := 1.0
	if top > 0 {
		gain = min(peak/top, maxGain)
	}
	for i := range pcm {
		pcm[i] *= gain
	}
	compress(pcm)
	out := make([]byte, 0, n)
	for _, v := range pcm {
		out = append(out, g711.Encode(int16(math.Round(min(max(v, -1), 1)*32767))))
	}
	for len(out) < n {
		out = append(out, 0xFF) // µ-law silence
	}
	return out
}

// compress lifts the quiet parts of normalized speech (see maxBoost). The gain is found per
// block and interpolated linearly between the blocks' centres, so it makes no clicks.
func compress(pcm []float64) {
	nb := (len(pcm) + block - 1) / block
	if nb == 0 {
		return
	}
	gains := make([]float64, nb)
	for b := range gains {
		var sum float64
		seg := pcm[b*block : min(len(pcm), (b+1)*block)]
		for _, v := range seg {
			sum += v * v
		}
		rms := math.Sqrt(sum / float64(len(seg)))
		g := min(max(level/max(rms, 1e-9), 1), maxBoost)
		if rms < floor {
			g = 1 + (g-1)*rms/floor
		}
		gains[b] = g
	}
	for i := range pcm {
		// Position between the centres of blocks b and b+1.
		x := (float64(i)+0.5)/block - 0.5
		b := int(math.Floor(x))
		f := x - float64(b)
		g0 := gains[min(max(b, 0), nb-1)]
		g1 := gains[min(max(b+1, 0), nb-1)]
		pcm[i] *= g0 + f*(g1-g0)
	}
}

// tail keeps the last bytes written to it: the end of a program's error output.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 512 {
		t.b = t.b[len(t.b)-512:]
	}
	return len(p), nil
}

// suffix is the error output as the end of an error message, if there was any.
func (t *tail) suffix() string {
	s := string(bytes.TrimSpace(t.b))
	if s == "" {
		return ""
	}
	return ": " + strings.ToValidUTF8(s, "?")
}
