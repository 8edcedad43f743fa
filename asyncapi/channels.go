package asyncapi

import (
	"slices"

	"github.com/backchannel-io/backchannel/frames"
	"github.com/swaggest/go-asyncapi/spec-2.4.0"
)

// channel is one channel of the document: a connection role of the WebSocket endpoint /v1/ws,
// or the WebRTC data channel frames.
type channel struct {
	// name is the channel's key in the document.
	name string
	// description says which connection the channel is.
	description string
	// server is the server the channel is on: serverWebSocket for the channels of /v1/ws.
	server string
	// who names the client in operation summaries ("a host").
	who string
	// opPrefix starts the operation ids ("host" → hostSends, hostReceives).
	opPrefix string
	// tags are the roles that use the channel.
	tags []string
	// sends are the frame types the client sends to the broker (publish).
	sends []string
	// receives are the frame types the broker sends to the client (subscribe).
	receives []string
}

// Which frames each role sends and receives, from SPEC sections 3–13 and 17.
var (
	// hostSends: connecting (3), declarations (4), results and cancel requests (5), defers (6),
	// progress and partial results (7), injected turns (8), interaction updates (9), and
	// session.end, which any role may send (3.6).
	hostSends = []string{
		"hello", "tools.declare", "tool_deferred", "tool_progress", "tool_partial_result",
		"tool_result", "job.cancel", "tool_interaction_update", "inject", "session.end",
	}
	// hostReceives: every broker → host frame about the host's tools and jobs (3–11), errors,
	// and the end of the session.
	hostReceives = []string{
		"welcome", "error", "tools.declared", "tool_call", "tool_deferred_ack", "job.cancel_result",
		"tool_cancel", "tool_job_narration", "tool_job_delivery_failed", "tool_interaction_answer",
		"tool_interaction_update_ack", "tool_deferred_resume", "session.ended",
	}
	// callerSends: text turns (17), cancel requests (11: job.cancel from a caller connection
	// is a caller_request) and session.end. inject is a host's frame (8): a caller that also
	// declares tools sends it as a host.
	callerSends = []string{"hello", "caller.text", "job.cancel", "session.end"}
	// callerReceives: transcripts (17), answers to its cancel requests, errors and the end of
	// the session. Narration lifecycle frames go to the job's host (8), not to the caller.
	callerReceives = []string{"welcome", "error", "job.cancel_result", "session.ended", "transcript"}
	// agentSends: the text agent frames of SPEC 13 and 9 (agent.interaction_answer),
	// job.cancel (SPEC 11: reason agent_request, as the built-in cancel tool) and session.end.
	agentSends = []string{
		"hello", "session.end", "agent.tool_call", "agent.turn_start", "agent.turn_end",
		"agent.message", "agent.local_result", "agent.interaction_answer", "agent.final",
		"conversation.create", "conversation.cancel", "job.cancel",
	}
	// agentReceives: the broker → agent frames of SPEC 13, job.cancel_result, errors and the
	// end of the session.
	agentReceives = []string{
		"welcome", "error", "session.ended", "agent.tool_result", "agent.prompt",
		"agent.message_committed", "agent.local_cancel", "conversation.created", "job.cancel_result",
	}
)

// Server names.
const (
	serverWebSocket = "websocket"
	serverWebRTC    = "webrtc"
)

// channels returns the channels of the document: host, caller and agent on /v1/ws, and the
// data channel frames, which carries the union of the caller's and the host's frames.
func channels() []channel {
	return []channel{
		roleChannel("host", "a host", "developer code that declares tools, executes the calls the broker "+
			"dispatches to it, defers slow ones under a handle, and reports progress, milestones, decisions and "+
			"results. `publish` lists the frames a host sends, `subscribe` those it receives.",
			hostSends, hostReceives),
		roleChannel("caller", "a caller", "the person talking to the agent. Besides these JSON frames (text "+
			"messages), binary WebSocket messages carry the caller's audio to the broker and the agent's audio "+
			"to the caller, both G.711 µ-law, 8 kHz, mono, 20 ms per message. A caller whose `hello` also "+
			"declares `tools` is a host as well and uses the frames of channel `host` too (channel `frames` "+
			"lists the union).",
			callerSends, callerReceives),
		roleChannel("agent", "a text agent", "an external text LLM agent or harness. It sends tool calls in "+
			"conversations, marks its turns, and receives results, background placeholders and prompts; "+
			"`wait`, `cancel` and `status` are built-in tools called with `agent.tool_call`.",
			agentSends, agentReceives),
		{
			name: "frames",
			description: "The WebRTC data channel named `frames` of a caller's peer connection. It carries " +
				"exactly the frames of the WebSocket protocol of a caller that may also be a host (the " +
				"browser SDK): the union of channels `caller` and `host`, one JSON frame per data-channel " +
				"message. Audio travels on the peer connection's PCMU track, not on this channel.",
			server: serverWebRTC, who: "a caller (and host) on the data channel", opPrefix: "dataChannel",
			tags:     []string{"caller", "host"},
			sends:    union(callerSends, hostSends),
			receives: union(callerReceives, hostReceives),
		},
	}
}

// roleChannel returns the channel of the connections of /v1/ws whose hello names role: who names
// such a client in operation summaries, about describes it, and sends and receives are its
// frame types.
func roleChannel(role, who, about string, sends, receives []string) channel {
	return channel{
		name:        role,
		description: "The WebSocket `/v1/ws` of a connection whose `hello` names `\"role\": \"" + role + "\"`: " + about,
		server:      serverWebSocket, who: who, opPrefix: role,
		tags:  []string{role},
		sends: inRegistryOrder(sends), receives: inRegistryOrder(receives),
	}
}

// channelItem builds the document's channel item of c, whose operations reference the messages
// of c (see messageKey) with a oneOf.
func channelItem(c channel) spec.ChannelItem {
	item := spec.ChannelItem{Description: c.description, Servers: []string{c.server}}
	if c.server == serverWebSocket {
		item.Bindings = &spec.ChannelBindingsObject{
			Ws: &spec.WebsocketsChannel{Method: spec.WebsocketsChannelMethodGET},
		}
	}
	var tags []spec.Tag
	for _, t := range c.tags {
		tags = append(tags, spec.Tag{Name: t})
	}
	pub := operation(c, c.opPrefix+"Sends", "Frames "+c.who+" sends to the broker.", c.sends, tags)
	sub := operation(c, c.opPrefix+"Receives", "Frames the broker sends to "+c.who+".", c.receives, tags)
	item.Publish, item.Subscribe = &pub, &sub
	return item
}

// operation builds an operation of channel c whose message is a oneOf of c's messages of types.
func operation(c channel, id, summary string, types []string, tags []spec.Tag) spec.Operation {
	op := spec.Operation{ID: id, Summary: summary, Tags: tags}
	oneOf := make([]spec.Message, 0, len(types))
	for _, typ := range types {
		oneOf = append(oneOf, spec.Message{Reference: &spec.Reference{Ref: messageRef(messageKey(c.name, typ))}})
	}
	op.MessageEns().OneOf1Ens().WithOneOf0(spec.MessageOneOf1OneOf0{OneOf: oneOf})
	return op
}

// inRegistryOrder returns types sorted as frames.Types lists them; unknown types go last.
func inRegistryOrder(types []string) []string {
	order := map[string]int{}
	for i, t := range frames.Types() {
		order[t] = i
	}
	out := slices.Clone(types)
	slices.SortStableFunc(out, func(a, b string) int {
		oa, okA := order[a]
		ob, okB := order[b]
		switch {
		case !okA && !okB:
			return 0
		case !okA:
			return 1
		case !okB:
			return -1
		}
		return oa - ob
	})
	return out
}

// union returns the frame types of a and b without repeats, in registry order.
func union(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return inRegistryOrder(slices.Compact(out))
}
