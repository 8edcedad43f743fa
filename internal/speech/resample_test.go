package speech

import (
	"math"
	"testing"
)

// sine is n samples of a unit sine of f Hz sampled at rate Hz.
func sine(f, rate float64, n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = math.Sin(2 * math.Pi * f * float64(i) / rate)
	}
	return x
}

// fitSine is the amplitude of the best fitting sine of f Hz in x (sampled at rate Hz) and the
// RMS of what is left: the least-squares projection on a sine and a cosine.
func fitSine(x []float64, f, rate float64) (amplitude, residual float64) {
	var ss, sc, cc, xs, xc float64
	for i, v := range x {
		s, c := math.Sincos(2 * math.Pi * f * float64(i) / rate)
		ss += s * s
		sc += s * c
		cc += c * c
		xs += v * s
		xc += v * c
	}
	det := ss*cc - sc*sc
	a := (xs*cc - xc*sc) / det
	b := (xc*ss - xs*sc) / det
	var e float64
	for i, v := range x {
		s, c := math.Sincos(2 * math.Pi * f * float64(i) / rate)
		r := v - a*s - b*c
		e += r * r
	}
	return math.Hypot(a, b), math.Sqrt(e / float64(len(x)))
}

// rms is the root mean square of x.
func rms(x []float64) float64 {
	var e float64
	for _, v := range x {
		e += v * v
	}
	return math.Sqrt(e / float64(len(x)))
}

// middle drops the first and last tenth of x: the filter's edges, where the input's
// surroundings count as silence.
func middle(x []float64) []float64 { return x[len(x)/10 : len(x)*9/10] }

// TestResample: a 1 kHz sine at 22050 Hz comes out at 8 kHz as the same 1 kHz sine (same
// amplitude, nothing else), one of 3 kHz nearly so (the pass band), and one of 5 kHz (which
// would fold back to 3 kHz) or of 4.2 kHz is removed, at least 80 dB down; played 1.25 times
// faster (from 22050·1.25 Hz), 1 kHz becomes 1.25 kHz; going up to 22050 Hz keeps 1 kHz.
func TestResample(t *testing.T) {
	const in = 22050
	tests := []struct {
		name      string
		f, rate   float64 // the input: a sine of f Hz sampled at rate Hz, for a second
		from, to  float64 // the conversion
		want      float64 // the output frequency
		minGain   float64 // its amplitude, at least (0: removed)
		maxResid  float64 // the RMS of everything else, at most
		maxOutRMS float64 // when removed: the output's RMS, at most
	}{
		{"1 kHz", 1000, in, in, 8000, 1000, 0.999, 1e-3, 0},
		{"3 kHz", 3000, in, in, 8000, 3000, 0.98, 2e-3, 0},
		{"1 kHz 1.25 times faster", 1000, in, in * 1.25, 8000, 1250, 0.999, 1e-3, 0},
		{"1 kHz up to 22050 Hz", 1000, 8000, 8000, in, 1000, 0.999, 1e-3, 0},
		{"5 kHz", 5000, in, in, 8000, 0, 0, 0, 1e-4},
		{"4.2 kHz", 4200, in, in, 8000, 0, 0, 0, 1e-4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := sine(tc.f, tc.rate, int(tc.rate))
			out := Resample(x, tc.from, tc.to)
			if want := int(float64(len(x)) * tc.to / tc.from); len(out) != want {
				t.Fatalf("%d samples out, want %d", len(out), want)
			}
			mid := middle(out)
			if tc.minGain == 0 {
				if r := rms(mid); r > tc.maxOutRMS {
					t.Errorf("a %.0f Hz sine comes out with RMS %.2g (%.0f dB), want at most %.2g", tc.f, r, 20*math.Log10(r/math.Sqrt(0.5)), tc.maxOutRMS)
				}
				return
			}
			// mid starts at sample len(out)/10: the phase of its fitted sine does not matter.
			a, resid := fitSine(mid, tc.want, tc.to)
			if a < tc.minGain || a > 1.001 || resid > tc.maxResid {
				t.Errorf("a %.0f Hz sine comes out as %.0f Hz of amplitude %.4f (want %.3f to 1.001) with %.2g RMS of anything else (want at most %.1g)",
					tc.f, tc.want, a, tc.minGain, resid, tc.maxResid)
			}
		})
	}
	if Resample(nil, in, 8000) != nil || Resample([]float64{1}, 0, 8000) != nil {
		t.Error("nothing to resample should give nothing")
	}
}
