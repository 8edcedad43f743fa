package asyncapi

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/backchannel-io/backchannel/frames"
)

// This file checks the channels and messages of the built document against package frames.

// wantChannels are the channels of the document.
var wantChannels = []string{"agent", "caller", "frames", "host"}

// TestChannelsAreTheRoles checks that the document has one channel per role of /v1/ws and the
// data channel, each saying which connection it is.
func TestChannelsAreTheRoles(t *testing.T) {
	chans := object(t, parsedDocument(t), "channels")
	if got := slices.Sorted(maps.Keys(chans)); !slices.Equal(got, wantChannels) {
		t.Fatalf("channels %v, want %v", got, wantChannels)
	}
	for _, name := range []string{"host", "caller", "agent"} {
		desc, _ := chans[name].(jsonObject)["description"].(string)
		if !strings.Contains(desc, "`/v1/ws`") || !strings.Contains(desc, `"role": "`+name+`"`) {
			t.Errorf("channel %s: the description does not say it is /v1/ws with role %s: %q", name, name, desc)
		}
	}
	if desc, _ := chans["frames"].(jsonObject)["description"].(string); !strings.Contains(desc, "WebRTC data channel") {
		t.Errorf("channel frames: the description does not say it is the WebRTC data channel: %q", desc)
	}
}

// TestEveryFrameTypeIsAMessage enumerates frames.Types and the messages of the document: every
// frame type is the name of at least one message, every message is a frame type, named and
// identified after its channel, with the payload schema of that frame.
func TestEveryFrameTypeIsAMessage(t *testing.T) {
	doc := parsedDocument(t)
	msgs := object(t, doc, "components/messages")
	defs := object(t, doc, "components/schemas")
	byName := map[string][]string{}
	for key, v := range msgs {
		m := v.(jsonObject)
		name, _ := m["name"].(string)
		byName[name] = append(byName[name], key)
		if _, ok := frames.New(name); !ok {
			t.Errorf("message %s is named %q, which is not a frame type", key, name)
			continue
		}
		ch, typ, _ := strings.Cut(key, ".")
		if typ != name || !slices.Contains(wantChannels, ch) {
			t.Errorf("message %s: want the key CHANNEL.%s", key, name)
		}
		if m["messageId"] != key {
			t.Errorf("message %s: messageId %v, want the key", key, m["messageId"])
		}
		ref, _ := object(t, m, "payload")["$ref"].(string)
		def, ok := defs[strings.TrimPrefix(ref, schemasPrefix)].(jsonObject)
		if !strings.HasPrefix(ref, schemasPrefix) || !ok {
			t.Errorf("message %s: payload $ref %q does not resolve", key, ref)
			continue
		}
		typeProp := object(t, def, "properties/type")
		if typeProp["const"] != name {
			t.Errorf("message %s: the payload's type member is %v, want const %q", key, typeProp, name)
		}
		if f, _ := frames.New(name); strings.TrimPrefix(ref, schemasPrefix) != reflect.TypeOf(f).Elem().Name() {
			t.Errorf("message %s: payload %s, want the schema named after the Go type", key, ref)
		}
	}
	for _, typ := range frames.Types() {
		if len(byName[typ]) == 0 {
			t.Errorf("frame type %s is no message of the document", typ)
		}
	}
}

// TestOneOfRefsResolve checks that every reference of every channel's oneOf names a message of
// the document, of that channel, and that every message is referenced exactly once.
func TestOneOfRefsResolve(t *testing.T) {
	doc := parsedDocument(t)
	msgs := object(t, doc, "components/messages")
	uses := map[string]int{}
	for name, v := range object(t, doc, "channels") {
		for _, op := range []string{"publish", "subscribe"} {
			path := "channels/" + name + "/" + op
			refs := oneOfRefs(t, object(t, v, op), path)
			if len(refs) == 0 {
				t.Errorf("%s has no messages", path)
			}
			for _, ref := range refs {
				key, ok := strings.CutPrefix(ref, messagesPrefix)
				if _, exists := msgs[key]; !ok || !exists {
					t.Errorf("%s: $ref %q names no message of the document", path, ref)
					continue
				}
				if !strings.HasPrefix(key, name+".") {
					t.Errorf("%s: $ref %q names a message of another channel", path, ref)
				}
				uses[key]++
			}
		}
	}
	for key := range msgs {
		if uses[key] != 1 {
			t.Errorf("message %s is referenced %d times, want once", key, uses[key])
		}
	}
}

// TestMessagesTravelInTheirDirection checks that publish lists only client → broker frames and
// subscribe only broker → client frames, as frames.DirectionOf says, and that x-direction agrees.
func TestMessagesTravelInTheirDirection(t *testing.T) {
	doc := parsedDocument(t)
	msgs := object(t, doc, "components/messages")
	want := map[string]frames.Direction{"publish": frames.ClientToBroker, "subscribe": frames.BrokerToClient}
	for name, v := range object(t, doc, "channels") {
		for op, dir := range want {
			path := "channels/" + name + "/" + op
			for _, ref := range oneOfRefs(t, object(t, v, op), path) {
				m, _ := msgs[strings.TrimPrefix(ref, messagesPrefix)].(jsonObject)
				typ, _ := m["name"].(string)
				if got, ok := frames.DirectionOf(typ); !ok || got != dir {
					t.Errorf("%s lists %s, which travels %q (known %v), want %q", path, typ, got, ok, dir)
				}
				if m["x-direction"] != string(dir) {
					t.Errorf("%s: message %s has x-direction %v, want %q", path, typ, m["x-direction"], dir)
				}
			}
		}
	}
}

// TestRolesShareTheBasics checks the frames every role has: hello, welcome, error, session.end
// and session.ended.
func TestRolesShareTheBasics(t *testing.T) {
	for _, c := range channels() {
		for _, typ := range []string{"hello", "session.end"} {
			if !slices.Contains(c.sends, typ) {
				t.Errorf("channel %s: a client cannot send %s", c.name, typ)
			}
		}
		for _, typ := range []string{"welcome", "error", "session.ended"} {
			if !slices.Contains(c.receives, typ) {
				t.Errorf("channel %s: a client cannot receive %s", c.name, typ)
			}
		}
		for _, list := range [][]string{c.sends, c.receives} {
			if !slices.Equal(list, inRegistryOrder(list)) || len(slices.Compact(slices.Clone(list))) != len(list) {
				t.Errorf("channel %s: %v is not in registry order without repeats", c.name, list)
			}
		}
	}
}

// TestDataChannelIsCallerAndHost checks that the data channel carries exactly the frames of a
// caller that is also a host.
func TestDataChannelIsCallerAndHost(t *testing.T) {
	by := map[string]channel{}
	for _, c := range channels() {
		by[c.name] = c
	}
	set := func(lists ...[]string) []string {
		return slices.Compact(slices.Sorted(slices.Values(slices.Concat(lists...))))
	}
	dc, caller, host := by["frames"], by["caller"], by["host"]
	if got, want := set(dc.sends), set(caller.sends, host.sends); !slices.Equal(got, want) {
		t.Errorf("data channel sends %v, want caller ∪ host %v", got, want)
	}
	if got, want := set(dc.receives), set(caller.receives, host.receives); !slices.Equal(got, want) {
		t.Errorf("data channel receives %v, want caller ∪ host %v", got, want)
	}
}

// TestDescriptionsComeFromDocComments checks every message's description against the doc
// comment of its Go type in the frames source tree as it is now.
func TestDescriptionsComeFromDocComments(t *testing.T) {
	src := mustTreeSources(t)
	doc := parsedDocument(t)
	for key, v := range object(t, doc, "components/messages") {
		m := v.(jsonObject)
		typ, _ := m["name"].(string)
		f, ok := frames.New(typ)
		if !ok {
			continue // reported by TestEveryFrameTypeIsAMessage
		}
		goName := reflect.TypeOf(f).Elem().Name()
		comment := src.Types[goName]
		if comment == "" {
			t.Errorf("frames.%s has no doc comment", goName)
			continue
		}
		if want := withWireName(comment, goName, typ); m["description"] != want {
			t.Errorf("message %s: description\n\t%q\nwant the doc comment of frames.%s\n\t%q", key, m["description"], goName, want)
		}
		if s, _ := m["summary"].(string); s == "" || !strings.HasPrefix(comment[len(goName):], strings.TrimPrefix(s, "`"+typ+"`")) {
			t.Errorf("message %s: summary %q is not the start of its description", key, s)
		}
	}
	for name, v := range object(t, doc, "components/schemas") {
		if d, _ := v.(jsonObject)["description"].(string); d == "" || !strings.HasPrefix(d, src.Types[name]) {
			t.Errorf("schema %s: description %q does not start with the doc comment of frames.%s", name, d, name)
		}
	}
}

// TestInfoDescribesTheEndpoint checks the notes every integrator needs first.
func TestInfoDescribesTheEndpoint(t *testing.T) {
	desc, _ := object(t, parsedDocument(t), "info")["description"].(string)
	for _, want := range []string{"`/v1/ws`", "first frame of every connection is `hello`", "G.711 µ-law", "Binary WebSocket messages"} {
		if !strings.Contains(desc, want) {
			t.Errorf("info.description does not contain %q", want)
		}
	}
}

// TestChannelsListTheFramesOfEachRole checks, in the built document, that each channel lists
// exactly the frames its role sends (publish) and receives (subscribe), as docs/spec.md assigns
// them: a frame missing from a role, or listed for a role that never sees it, fails.
func TestChannelsListTheFramesOfEachRole(t *testing.T) {
	// host: SPEC 3 (hello, welcome, session.end/ended), 4, 5, 6, 7, 8 (narration, delivery
	// failure, inject), 9, 10 (tool_deferred_resume), 11 (job.cancel).
	host := [2][]string{
		{"hello", "tools.declare", "tool_deferred", "tool_progress", "tool_partial_result", "tool_result",
			"job.cancel", "tool_interaction_update", "inject", "session.end"},
		{"welcome", "error", "tools.declared", "tool_call", "tool_deferred_ack", "job.cancel_result",
			"tool_cancel", "tool_job_narration", "tool_job_delivery_failed", "tool_interaction_answer",
			"tool_interaction_update_ack", "tool_deferred_resume", "session.ended"},
	}
	// caller: SPEC 17 (caller.text, transcript), 11 (job.cancel from a caller), 3.6.
	caller := [2][]string{
		{"hello", "caller.text", "job.cancel", "session.end"},
		{"welcome", "error", "job.cancel_result", "session.ended", "transcript"},
	}
	// agent: SPEC 13 and 9 (agent.interaction_answer), 11 (job.cancel from an agent), 3.6.
	agent := [2][]string{
		{"hello", "session.end", "agent.tool_call", "agent.turn_start", "agent.turn_end", "agent.message",
			"agent.local_result", "agent.interaction_answer", "agent.final", "conversation.create",
			"conversation.cancel", "job.cancel"},
		{"welcome", "error", "session.ended", "agent.tool_result", "agent.prompt", "agent.message_committed",
			"agent.local_cancel", "conversation.created", "job.cancel_result"},
	}
	// frames: the data channel of a caller that is also a host (SPEC 1 and 17).
	both := [2][]string{slices.Concat(caller[0], host[0]), slices.Concat(caller[1], host[1])}
	want := map[string][2][]string{"host": host, "caller": caller, "agent": agent, "frames": both}

	doc := parsedDocument(t)
	msgs := object(t, doc, "components/messages")
	chans := object(t, doc, "channels")
	set := func(l []string) []string { return slices.Compact(slices.Sorted(slices.Values(l))) }
	for name, w := range want {
		for i, op := range []string{"publish", "subscribe"} {
			path := "channels/" + name + "/" + op
			var got []string
			for _, ref := range oneOfRefs(t, object(t, chans[name], op), path) {
				m, _ := msgs[strings.TrimPrefix(ref, messagesPrefix)].(jsonObject)
				typ, _ := m["name"].(string)
				got = append(got, typ)
			}
			if g, w := set(got), set(w[i]); !slices.Equal(g, w) {
				t.Errorf("%s lists %v, want %v", path, g, w)
			}
		}
	}
}

// TestOnlyWelcomeHasNoSeq: every broker frame's schema has seq, except welcome's (SPEC 2).
func TestOnlyWelcomeHasNoSeq(t *testing.T) {
	schemas := object(t, parsedDocument(t), "components/schemas")
	for _, typ := range frames.Types() {
		if d, _ := frames.DirectionOf(typ); d != frames.BrokerToClient {
			continue
		}
		f, _ := frames.New(typ)
		name := reflect.TypeOf(f).Elem().Name()
		props := object(t, schemas[name], "properties")
		if _, has := props["seq"]; has != (typ != "welcome") {
			t.Errorf("schema %s (%s) has seq: %v", name, typ, has)
		}
	}
}
