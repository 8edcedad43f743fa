package speech

import (
	"bytes"
	"encoding/binary"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// wavStream is a WAV stream as a program writing to a pipe makes it: sizes it cannot know
// (0xFFFFFFFF), optionally a chunk before the format, and an odd-sized one (with its pad byte)
// between format and data.
func wavStream(rate uint32, channels, bits uint16, samples []int16, extra bool) []byte {
	var b bytes.Buffer
	le := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	le(uint32(0xFFFFFFFF))
	b.WriteString("WAVE")
	if extra {
		b.WriteString("LIST")
		le(uint32(4))
		b.WriteString("INFO")
	}
	b.WriteString("fmt ")
	le(uint32(16))
	le(uint16(1))
	le(channels)
	le(rate)
	le(rate * uint32(channels) * uint32(bits) / 8)
	le(channels * bits / 8)
	le(bits)
	if extra {
		b.WriteString("odd ")
		le(uint32(3))
		b.WriteString("abc\x00")
	}
	b.WriteString("data")
	le(uint32(0xFFFFFFFF))
	for _, s := range samples {
		le(s)
	}
	return b.Bytes()
}

// TestReadWAV: the header gives the format, the data runs to the end of the stream whatever
// its size field says, reads of any size work (a sample split between two reads included),
// only the first keep of audio is kept while all of it is counted, and the loud part is found.
func TestReadWAV(t *testing.T) {
	samples := make([]int16, 1000)
	for i := 100; i < 700; i++ {
		samples[i] = int16(2000 * (i%7 - 3)) // loud from 100 to 698 (but for every seventh sample)
	}
	samples[699] = LoudSample - 1 // quiet
	data := wavStream(1000, 1, 16, samples, true)
	readers := map[string]func() io.Reader{
		"whole":       func() io.Reader { return bytes.NewReader(data) },
		"byte a time": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(data)) },
		"half reads":  func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) },
	}
	for name, r := range readers {
		c, err := ReadWAV(r(), time.Second)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c.Rate != 1000 || c.Total != 1000 || !slices.Equal(c.Samples, samples) || c.First != 100 || c.End != 699 {
			t.Errorf("%s: rate %d, total %d, %d samples kept (equal %v), loud %d…%d; want 1000, 1000, all, 100…699",
				name, c.Rate, c.Total, len(c.Samples), slices.Equal(c.Samples, samples), c.First, c.End)
		}
		if got := c.Loud(); got != 599*time.Millisecond {
			t.Errorf("%s: loud for %v, want 599ms", name, got)
		}
	}
	c, err := ReadWAV(bytes.NewReader(data), 250*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Samples) != 250 || c.Total != 1000 || c.First != 100 || c.End != 699 {
		t.Errorf("keeping 250 ms: %d kept, total %d, loud %d…%d; want 250, 1000, 100…699", len(c.Samples), c.Total, c.First, c.End)
	}
	silent, err := ReadWAV(bytes.NewReader(wavStream(8000, 1, 16, make([]int16, 80), false)), time.Second)
	if err != nil || silent.End != 0 || silent.First != 0 || silent.Loud() != 0 {
		t.Errorf("silence: %+v, %v; want nothing loud", silent, err)
	}

	bad := map[string][]byte{
		"empty":      nil,
		"not RIFF":   []byte("RIFX\xff\xff\xff\xffWAVEfmt "),
		"stereo":     wavStream(22050, 2, 16, samples, false),
		"8-bit":      wavStream(22050, 1, 8, nil, false),
		"no fmt":     append([]byte("RIFF\xff\xff\xff\xffWAVE"), []byte("data\xff\xff\xff\xff\x01\x00")...),
		"cut header": data[:30],
		"huge chunk": append([]byte("RIFF\xff\xff\xff\xffWAVEjunk\xff\xff\xff\x7f"), make([]byte, 100)...),
	}
	for name, b := range bad {
		if c, err := ReadWAV(bytes.NewReader(b), time.Second); err == nil {
			t.Errorf("%s: read as %+v, want an error", name, c)
		} else if !strings.HasPrefix(err.Error(), "wav: ") {
			t.Errorf("%s: error %q does not start with wav:", name, err)
		}
	}
}
