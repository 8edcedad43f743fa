package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// The broker's own measurements of the voice hot path, read from serve's /metrics at the start
// and the end of a step: the difference of the histograms' bucket counts gives the step's
// percentiles, the difference of the counters its packets.

// The metrics bench voice reads (broker/metrics.go).
const (
	metricAudioIn        = "backchannel_voice_audio_in_delay_seconds"
	metricAudioOut       = "backchannel_voice_audio_out_delay_seconds"
	metricBargeIn        = "backchannel_voice_barge_in_seconds"
	metricAudioInPkts    = "backchannel_voice_audio_in_packets_total"
	metricAudioOutPkts   = "backchannel_voice_audio_out_packets_total"
	metricAudioOutDrops  = "backchannel_voice_audio_out_dropped_total"
	metricNarrationDelay = "backchannel_narration_start_delay_seconds"
)

// histogram is a Prometheus histogram read from the text format: cumulative counts by upper
// bound.
type histogram struct {
	bounds []float64 // ascending, +Inf last
	counts []float64 // cumulative
}

// scrape is one read of /metrics: the histograms and the plain samples by name.
type scrape struct {
	hists  map[string]*histogram
	values map[string]float64
}

// scrapeMetrics reads http://addr/metrics.
func scrapeMetrics(ctx context.Context, addr string) (*scrape, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	s := &scrape{hists: map[string]*histogram{}, values: map[string]float64{}}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		key := line[:sp]
		if name, rest, ok := strings.Cut(key, "_bucket{le=\""); ok {
			le, err := strconv.ParseFloat(strings.TrimSuffix(rest, "\"}"), 64)
			if err != nil {
				continue
			}
			h := s.hists[name]
			if h == nil {
				h = &histogram{}
				s.hists[name] = h
			}
			h.bounds = append(h.bounds, le)
			h.counts = append(h.counts, v)
			continue
		}
		s.values[key] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, h := range s.hists {
		sort.Sort(h)
	}
	return s, nil
}

func (h *histogram) Len() int           { return len(h.bounds) }
func (h *histogram) Less(i, j int) bool { return h.bounds[i] < h.bounds[j] }
func (h *histogram) Swap(i, j int) {
	h.bounds[i], h.bounds[j] = h.bounds[j], h.bounds[i]
	h.counts[i], h.counts[j] = h.counts[j], h.counts[i]
}

// since is the histogram of the observations between an earlier read and this one.
func (h *histogram) since(before *histogram) *histogram {
	d := &histogram{bounds: h.bounds, counts: make([]float64, len(h.counts))}
	for i := range h.counts {
		d.counts[i] = h.counts[i]
		if before != nil && i < len(before.counts) {
			d.counts[i] -= before.counts[i]
		}
	}
	return d
}

// total is the number of observations.
func (h *histogram) total() float64 {
	if h == nil || len(h.counts) == 0 {
		return 0
	}
	return h.counts[len(h.counts)-1]
}

// quantile estimates the q-quantile in seconds, interpolating linearly inside its bucket (as
// Prometheus's histogram_quantile does); +Inf when it lies beyond the last finite bound, NaN
// without observations.
func (h *histogram) quantile(q float64) float64 {
	n := h.total()
	if n == 0 {
		return math.NaN()
	}
	rank := q * n
	lower, below := 0.0, 0.0
	for i, c := range h.counts {
		if c >= rank {
			upper := h.bounds[i]
			if math.IsInf(upper, 1) {
				return upper
			}
			if c == below {
				return upper
			}
			return lower + (upper-lower)*(rank-below)/(c-below)
		}
		lower, below = h.bounds[i], c
	}
	return math.Inf(1)
}

// countAtMost is the number of observations at most bound (a bucket bound).
func (h *histogram) countAtMost(bound float64) float64 {
	for i, b := range h.bounds {
		if b >= bound {
			return h.counts[i]
		}
	}
	return h.total()
}

// stepMetrics is what the broker measured in one step.
type stepMetrics struct {
	in, out, bargeIn, narration *histogram
	inPackets, outPackets       float64
	outDropped                  float64
}

// diffScrapes is the step between two reads.
func diffScrapes(before, after *scrape) stepMetrics {
	h := func(name string) *histogram {
		a := after.hists[name]
		if a == nil {
			return &histogram{}
		}
		return a.since(before.hists[name])
	}
	v := func(name string) float64 { return after.values[name] - before.values[name] }
	return stepMetrics{in: h(metricAudioIn), out: h(metricAudioOut), bargeIn: h(metricBargeIn), narration: h(metricNarrationDelay),
		inPackets: v(metricAudioInPkts), outPackets: v(metricAudioOutPkts), outDropped: v(metricAudioOutDrops)}
}
