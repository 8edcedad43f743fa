package voicetest

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/backchannel-io/backchannel/broker"
	"github.com/backchannel-io/backchannel/broker/model"
	"github.com/backchannel-io/backchannel/broker/wiretest"
	"github.com/backchannel-io/backchannel/internal/brokertest"
)

// BenchmarkNarrationStart measures "floor free → narration request sent" (design target: ≤ 10 ms, docs/BENCHMARKS.md)
// inside the broker, with the scripted model over real WebSocket connections: in each iteration
// the caller talks, the host sends a milestone to narrate, the caller falls silent, and the
// milestone is spoken once the floor is free. The broker's histogram
// backchannel_narration_start_delay_seconds (every narration of the run, hand-off included) gives
// the share of requests sent within 10 ms, the mean, and the upper bound of the bucket that holds
// the 99th percentile. It also counts the frames one milestone narration moves: text frames to
// the host (lifecycle) and to the caller (transcripts), and 20 ms audio frames to the caller.
func BenchmarkNarrationStart(b *testing.B) {
	br := brokertest.Start(b, brokertest.Options{Store: "memory", Config: broker.Config{
		Models: map[string]model.Factory{"scripted": scriptedModel}, DefaultModel: "scripted"}})
	vs := newVoiceSession(b, br, true)
	j := vs.startJob("report")
	hostFrom, callerFrom := vs.host.mark(), vs.caller.mark()
	b.ResetTimer()
	for i := range b.N {
		vs.talk()
		vs.partial(j, fmt.Sprintf("step %d", i), true, nil)
		vs.host.expect(narr(j.callID, "milestone", "queued"))
		vs.mic.silence()
		vs.host.expect(narr(j.callID, "milestone", "delivered"))
	}
	b.StopTimer()
	hostText, _ := countFrames(vs.host.events()[hostFrom:])
	callerText, callerAudio := countFrames(vs.caller.events()[callerFrom:])
	b.ReportMetric(float64(hostText)/float64(b.N), "host-frames/narration")
	b.ReportMetric(float64(callerText)/float64(b.N), "caller-frames/narration")
	b.ReportMetric(float64(callerAudio)/float64(b.N), "audio-frames/narration")
	buckets, sum, count := narrationDelays(b, br.URL)
	if count == 0 {
		b.Fatal("no narration start was observed")
	}
	p99 := -1.0
	for _, bk := range buckets {
		if bk.count >= 0.99*count {
			p99 = bk.le
			break
		}
	}
	within := 0.0
	for _, bk := range buckets {
		if bk.le == 0.01 {
			within = bk.count / count
		}
	}
	b.ReportMetric(1000*sum/count, "mean-ms")
	b.ReportMetric(1000*p99, "p99-bucket-ms")
	b.ReportMetric(100*within, "%within-10ms")
	b.ReportMetric(count, "narrations")
}

type bucket struct{ le, count float64 }

// narrationDelays reads the histogram backchannel_narration_start_delay_seconds from /metrics.
func narrationDelays(tb testing.TB, url string) (buckets []bucket, sum, count float64) {
	status, _, body := wiretest.HTTPDo(tb, "GET", url+"/metrics", "", "", "")
	if status != 200 {
		tb.Fatalf("GET /metrics: %d", status)
	}
	const name = "backchannel_narration_start_delay_seconds"
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		line := sc.Text()
		key, val, ok := strings.Cut(line, " ")
		if !ok || !strings.HasPrefix(key, name) {
			continue
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			tb.Fatalf("metrics line %q: %v", line, err)
		}
		switch {
		case key == name+"_sum":
			sum = v
		case key == name+"_count":
			count = v
		case strings.HasPrefix(key, name+`_bucket{le="`):
			le, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(key, name+`_bucket{le="`), `"}`), 64)
			if err == nil {
				buckets = append(buckets, bucket{le: le, count: v})
			}
		}
	}
	return buckets, sum, count
}

// countFrames counts the text frames and the audio messages among events.
func countFrames(events []event) (text, audio int) {
	for _, e := range events {
		if e.isAudio() {
			audio++
		} else {
			text++
		}
	}
	return text, audio
}
