// Package g711 converts between 16-bit linear PCM and G.711 µ-law, the audio format of
// callers and agents (8 kHz, mono, 20 ms = 160 samples per message), and measures loudness.
package g711

import "math"

// SamplesPer20ms is the number of samples in one 20 ms frame at 8 kHz.
const SamplesPer20ms = 160

const (
	bias = 0x84
	clip = 32635
)

// Encode converts one linear sample to µ-law.
func Encode(sample int16) byte {
	s := int(sample)
	sign := 0
	if s < 0 {
		s = -s
		sign = 0x80
	}
	if s > clip {
		s = clip
	}
	s += bias
	exponent := 7
	for mask := 0x4000; s&mask == 0 && exponent > 0; mask >>= 1 {
		exponent--
	}
	mantissa := (s >> (exponent + 3)) & 0x0f
	return ^byte(sign | exponent<<4 | mantissa)
}

// decodeTable maps every µ-law byte to its linear sample.
var decodeTable = func() [256]int16 {
	var t [256]int16
	for i := range t {
		u := ^byte(i)
		sign := u & 0x80
		exponent := int(u>>4) & 0x07
		mantissa := int(u) & 0x0f
		s := ((mantissa << 3) + bias) << exponent
		s -= bias
		if sign != 0 {
			s = -s
		}
		t[i] = int16(s)
	}
	return t
}()

// Decode converts one µ-law byte to a linear sample.
func Decode(b byte) int16 { return decodeTable[b] }

// RMS is the root mean square of a µ-law frame, in linear units (0 … 32767).
func RMS(frame []byte) float64 {
	if len(frame) == 0 {
		return 0
	}
	var sum float64
	for _, b := range frame {
		s := float64(decodeTable[b])
		sum += s * s
	}
	return math.Sqrt(sum / float64(len(frame)))
}

// Tone returns ms milliseconds of a sine tone of freq Hz at amplitude (0 … 1) as µ-law.
func Tone(freq float64, ms int, amplitude float64) []byte {
	n := ms * 8
	out := make([]byte, n)
	for i := range out {
		v := amplitude * 32767 * math.Sin(2*math.Pi*freq*float64(i)/8000)
		out[i] = Encode(int16(v))
	}
	return out
}

// Silence returns ms milliseconds of µ-law silence.
func Silence(ms int) []byte {
	out := make([]byte, ms*8)
	for i := range out {
		out[i] = 0xFF
	}
	return out
}
