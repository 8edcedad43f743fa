package speech

import (
	"math"
	"sync"
)

// The resampler's low-pass filter: a Kaiser-windowed sinc.
const (
	// zeroCrossings is how many zero crossings of the sinc the filter spans on each side.
	zeroCrossings = 16
	// kaiserBeta shapes the window: about 80 dB of stop-band attenuation.
	kaiserBeta = 8.0
	// passband is the filter's cut-off (its −6 dB point) as a share of the lower of the two
	// Nyquist frequencies. The transition band, about 0.25 of it wide with this window and
	// length, then ends just below that Nyquist frequency, so nothing above it folds back: going
	// to 8 kHz, the response is flat to 3 kHz (−0.1 dB), −6 dB at 3.44 kHz, and at least 85 dB
	// down from 4 kHz on — the telephone band.
	passband = 0.86
	// phases is how many table entries the kernel has per zero crossing (the rest is linear
	// interpolation).
	phases = 512
)

// kernel is the filter's impulse response h(u) = sinc(u)·kaiser(u/zeroCrossings) for
// u = 0, 1/phases, 2/phases … zeroCrossings (it is even), with one zero entry past the end.
var kernel = sync.OnceValue(func() []float64 {
	k := make([]float64, zeroCrossings*phases+2)
	i0b := besselI0(kaiserBeta)
	for i := range zeroCrossings*phases + 1 {
		u := float64(i) / phases
		sinc := 1.0
		if i > 0 {
			sinc = math.Sin(math.Pi*u) / (math.Pi * u)
		}
		r := u / zeroCrossings
		k[i] = sinc * besselI0(kaiserBeta*math.Sqrt(max(0, 1-r*r))) / i0b
	}
	return k
})

// besselI0 is the modified Bessel function of the first kind, order 0 (its power series).
func besselI0(x float64) float64 {
	sum, term := 1.0, 1.0
	for k := 1; k < 64; k++ {
		term *= (x / (2 * float64(k))) * (x / (2 * float64(k)))
		sum += term
		if term < sum*1e-17 {
			break
		}
	}
	return sum
}

// Resample converts audio sampled at from Hz to to Hz, band-limited by a Kaiser-windowed sinc
// low-pass at 0.86 of the lower Nyquist frequency (at least 85 dB down from that Nyquist
// frequency on), so that a rate conversion down does not fold high frequencies back into the
// band. The
// rates may be any positive numbers: playing audio faster is resampling from a higher rate
// than it was recorded at. Samples outside in count as silence. The output has
// floor(len(in)·to/from) samples.
func Resample(in []float64, from, to float64) []float64 {
	if from <= 0 || to <= 0 || len(in) == 0 {
		return nil
	}
	n := int(float64(len(in)) * to / from)
	out := make([]float64, n)
	step := from / to // input samples per output sample
	// The cut-off in cycles per input sample; 2·fc scales the kernel's argument and its gain.
	fc := passband * 0.5 * min(1, to/from)
	scale := 2 * fc
	half := zeroCrossings / scale // the filter's half-width in input samples
	k := kernel()
	last := len(k) - 2
	for j := range out {
		x := float64(j) * step
		lo := max(0, int(math.Ceil(x-half)))
		hi := min(len(in)-1, int(math.Floor(x+half)))
		var acc float64
		for i := lo; i <= hi; i++ {
			pos := math.Abs(x-float64(i)) * scale * phases
			p := int(pos)
			if p > last {
				continue
			}
			frac := pos - float64(p)
			acc += in[i] * (k[p] + frac*(k[p+1]-k[p]))
		}
		out[j] = acc * scale
	}
	return out
}
