package openai

import (
	"encoding/base64"
	"time"
)

// bytesPerMS is G.711 µ-law at 8 kHz: one byte a sample.
const bytesPerMS = 8

// CallerAudio implements model.Model: input_audio_buffer.append of the µ-law chunk as it is.
// Audio given while the adapter reconnects is dropped: the new session hears the caller from
// the moment it is connected. This runs for every 20 ms of caller audio: the event is encoded
// by hand in one allocation before the lock is taken, and a failed send is not logged (the
// reader reports the connection's failure once).
func (m *Model) CallerAudio(chunk []byte) {
	if len(chunk) == 0 {
		return
	}
	b := appendEvent(chunk)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.connected() {
		_ = m.c.sendEncoded(b)
	}
}

// The input_audio_buffer.append event around its base64 audio (the base64 alphabet needs no
// JSON escaping): the bytes json.Marshal makes of audioAppend.
const (
	appendHead = `{"type":"` + evAudioAppend + `","audio":"`
	appendTail = `"}`
)

// appendEvent encodes input_audio_buffer.append of chunk.
func appendEvent(chunk []byte) []byte {
	n := base64.StdEncoding.EncodedLen(len(chunk))
	b := make([]byte, len(appendHead)+n+len(appendTail))
	copy(b, appendHead)
	base64.StdEncoding.Encode(b[len(appendHead):], chunk)
	copy(b[len(appendHead)+n:], appendTail)
	return b
}

// audioTrack is the agent audio of one response: the item that holds it and how much arrived
// when, to estimate how much the caller heard when the response is cut.
type audioTrack struct {
	responseID   string
	itemID       string
	contentIndex int
	bytes        int
	first        time.Time
	truncated    bool
}

// playedMS estimates how much of the audio the caller heard by now: the broker plays agent
// audio in real time from its first chunk, so it is the time since the first chunk, at most
// the audio received.
func (t *audioTrack) playedMS(now time.Time) int64 {
	got := int64(t.bytes / bytesPerMS)
	return min(got, now.Sub(t.first).Milliseconds())
}

// audioTracks are the tracks of the latest responses. Guarded by Model.mu.
type audioTracks struct {
	tracks []*audioTrack
}

// maxTracks is how many responses' tracks are kept: a response can be cut while the broker
// still plays it, long after the server finished it.
const maxTracks = 16

// add accounts audio of a response's item.
func (a *audioTracks) add(responseID, itemID string, contentIndex, n int, now time.Time) {
	t := a.get(responseID)
	if t == nil || t.itemID != itemID || t.contentIndex != contentIndex {
		if t != nil {
			t.itemID, t.contentIndex, t.bytes, t.first = itemID, contentIndex, 0, now
		} else {
			if len(a.tracks) >= maxTracks {
				a.tracks = a.tracks[1:]
			}
			t = &audioTrack{responseID: responseID, itemID: itemID, contentIndex: contentIndex, first: now}
			a.tracks = append(a.tracks, t)
		}
	}
	t.bytes += n
}

// get returns a response's track.
func (a *audioTracks) get(responseID string) *audioTrack {
	for _, t := range a.tracks {
		if t.responseID == responseID {
			return t
		}
	}
	return nil
}

// Cancel implements model.Model (barge-in): response.cancel while the response is still
// being generated, then conversation.item.truncate of its audio item at the estimated played
// length, so that the model's memory holds only what the caller heard. Both are quiet: a
// response that ended meanwhile, or an item that is gone, is not an error.
func (m *Model) Cancel(responseID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.connected() || responseID == "" {
		return // while reconnecting there is nothing to cancel: the drop ended every response
	}
	if m.resp.active[responseID] {
		_ = m.sendLocked(responseCancel{Type: evResponseCancel, EventID: m.quietLocked("response.cancel"), ResponseID: responseID})
	}
	t := m.tracks.get(responseID)
	if t == nil || t.truncated || t.itemID == "" {
		return
	}
	t.truncated = true
	_ = m.sendLocked(itemTruncate{Type: evItemTruncate, EventID: m.quietLocked("conversation.item.truncate"), ItemID: t.itemID,
		ContentIndex: t.contentIndex, AudioEndMS: t.playedMS(time.Now())})
}
