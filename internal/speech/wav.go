package speech

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// Clip is mono 16-bit linear audio read from a WAV stream, with where its sound is.
type Clip struct {
	Rate    int     // samples per second
	Samples []int16 // the first samples of the stream: as many as were asked to be kept
	Total   int     // how many samples the stream had, kept or not
	// First and End bound the loud part of the whole stream: samples First up to End
	// (exclusive) run from the first to the last sample of magnitude LoudSample or more. Both
	// are 0 when nothing was loud.
	First, End int
}

// LoudSample is the magnitude from which a sample counts as sound rather than silence when a
// clip's loud part is found (about −54 dBFS: espeak-ng's pauses are far quieter).
const LoudSample = 64

// Loud is the duration of the clip's loud part.
func (c *Clip) Loud() time.Duration {
	if c.Rate == 0 {
		return 0
	}
	return time.Duration(c.End-c.First) * time.Second / time.Duration(c.Rate)
}

// maxHeader bounds the bytes of WAV chunks read before the data chunk.
const maxHeader = 64 << 10

// ReadWAV reads a WAV stream of 16-bit mono PCM: its header for the format, then the samples of
// its data chunk to the end of the stream. The data chunk's size is not trusted, since a
// program writing a WAV to a pipe (espeak-ng --stdout) cannot know it: the stream ends the data.
// It keeps the samples of the first keep of audio and counts the rest (Total, First, End), so
// that reading a long stream costs no more memory than keep.
func ReadWAV(r io.Reader, keep time.Duration) (*Clip, error) {
	br := bufio.NewReaderSize(r, 8192)
	var riff [12]byte
	if _, err := io.ReadFull(br, riff[:]); err != nil {
		return nil, fmt.Errorf("wav: reading the RIFF header: %w", err)
	}
	if string(riff[0:4]) != "RIFF" || string(riff[8:12]) != "WAVE" {
		return nil, errors.New("wav: not a RIFF WAVE stream")
	}
	c := &Clip{}
	header := 0
	for {
		var ch [8]byte
		if _, err := io.ReadFull(br, ch[:]); err != nil {
			return nil, fmt.Errorf("wav: reading a chunk header: %w", err)
		}
		id, size := string(ch[0:4]), int64(binary.LittleEndian.Uint32(ch[4:8]))
		if id == "data" {
			break
		}
		header += 8 + int(min(size, maxHeader+1))
		if header > maxHeader {
			return nil, errors.New("wav: no data chunk in the first 64 KiB")
		}
		if id != "fmt " {
			if _, err := io.CopyN(io.Discard, br, size+size%2); err != nil {
				return nil, fmt.Errorf("wav: skipping chunk %q: %w", id, err)
			}
			continue
		}
		if size < 16 {
			return nil, fmt.Errorf("wav: fmt chunk of %d bytes", size)
		}
		f := make([]byte, size+size%2)
		if _, err := io.ReadFull(br, f); err != nil {
			return nil, fmt.Errorf("wav: reading the fmt chunk: %w", err)
		}
		format := binary.LittleEndian.Uint16(f[0:2])
		channels := binary.LittleEndian.Uint16(f[2:4])
		rate := binary.LittleEndian.Uint32(f[4:8])
		bits := binary.LittleEndian.Uint16(f[14:16])
		if format != 1 || channels != 1 || bits != 16 || rate == 0 || rate > 384000 {
			return nil, fmt.Errorf("wav: format %d, %d channels, %d bits at %d Hz: want 16-bit mono PCM", format, channels, bits, rate)
		}
		c.Rate = int(rate)
	}
	if c.Rate == 0 {
		return nil, errors.New("wav: data before the fmt chunk")
	}
	limit := int(keep.Seconds() * float64(c.Rate))
	c.Samples = make([]int16, 0, min(limit, 1<<16))
	var buf [4096]byte
	carry := 0 // a byte of a sample split across two reads
	first := -1
	for {
		n, err := br.Read(buf[carry:])
		n += carry
		even := n &^ 1
		for i := 0; i < even; i += 2 {
			s := int16(binary.LittleEndian.Uint16(buf[i:]))
			if s >= LoudSample || s <= -LoudSample {
				if first < 0 {
					first = c.Total
				}
				c.End = c.Total + 1
			}
			if c.Total < limit {
				c.Samples = append(c.Samples, s)
			}
			c.Total++
		}
		carry = n - even
		if carry > 0 {
			buf[0] = buf[even]
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("wav: reading the data: %w", err)
		}
	}
	if first >= 0 {
		c.First = first
	}
	return c, nil
}
