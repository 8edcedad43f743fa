package relay

import (
	"encoding/json"
	"testing"
)

// TestWireIsUnchanged pins the relay's wire: nodes of different builds talk through it, so a
// field's JSON name, an op's string or what is left out when empty never changes.
func TestWireIsUnchanged(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{Message{Op: OpOversized, From: "node0.ab", Conn: "rl_x", Data: []byte("hi"), Code: 1012, Reason: "r", Size: 9, Ref: "f1", N: 7},
			`{"op":"oversized","from":"node0.ab","conn":"rl_x","data":"aGk=","code":1012,"reason":"r","size":9,"ref":"f1","n":7}`},
		{Message{Op: OpDrop, From: "a", Conn: "c"}, `{"op":"drop","from":"a","conn":"c"}`},
		{Message{Op: OpPing, From: "a"}, `{"op":"ping","from":"a","conn":""}`},
		{PingData{Edges: []LinkState{{Conn: "c1", Done: 2}}, Held: []LinkState{{Conn: "c2", Done: 0}}},
			`{"edges":[{"conn":"c1","done":2}],"held":[{"conn":"c2","done":0}]}`},
		{PingData{}, `{}`},
		{PongData{Reset: []string{"c1"}, Dropped: []string{"c2"}}, `{"reset":["c1"],"dropped":["c2"]}`},
		{PongData{}, `{}`},
		{[]string{OpHello, OpFrame, OpAudio, OpOversized, OpDrop, OpAck, OpSend, OpSendAudio, OpClose, OpAbort, OpPing, OpPong},
			`["hello","frame","audio","oversized","drop","ack","send","send_audio","close","abort","ping","pong"]`},
	} {
		b, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("%#v is sent as\n %s, want\n %s", c.v, b, c.want)
		}
	}
}
