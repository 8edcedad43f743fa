package asyncapi

import (
	"github.com/backchannel-io/backchannel/frames"
	"github.com/swaggest/go-asyncapi/spec-2.4.0"
)

// This file holds the parts of the document that describe the protocol as a whole: the info
// object, the servers and the role tags.

// documentID identifies the document (the asyncapi id field, a URI).
const documentID = "urn:github.com:backchannel-io:backchannel:" + frames.Protocol

// repositoryURL is the project's home, the document's contact.
const repositoryURL = "https://github.com/backchannel-io/backchannel"

// infoDescription is the document's introduction (CommonMark).
const infoDescription = "Backchannel is a realtime broker for deferred background tools in voice and text " +
	"agents. This document lists every frame of protocol `" + frames.Protocol + "`, generated from the Go " +
	"types of package `frames`; `docs/protocol.md` is the guide to using them.\n\n" +
	"- **Endpoint.** Hosts, callers and text agents connect to the WebSocket endpoint `/v1/ws` " +
	"(`ws://` on a loopback address, `wss://` behind TLS). Every frame is one JSON object in one " +
	"WebSocket text message, with a string member `type`; unknown members are ignored.\n" +
	"- **First frame.** The first frame of every connection is `hello` (within 10 s, else the " +
	"connection is closed with status 1008). It names the role — `host`, `caller` or `agent` — and " +
	"creates, joins or resumes a session; the broker answers `welcome`, or `error` and closes.\n" +
	"- **Audio.** Binary WebSocket messages carry audio, for callers only: G.711 µ-law, 8 kHz, " +
	"mono, 20 ms per message — the caller's speech to the broker and the agent's speech to the " +
	"caller. Over WebRTC the audio is the PCMU track and the frames travel on the data channel " +
	"`frames`.\n" +
	"- **Ids and order.** A client frame may carry `id` (at most 64 bytes); every broker frame " +
	"answering it carries `ref` with that id. Every broker frame except `welcome` carries `seq`, " +
	"counting the frames of the connection's slot from 1; a reconnecting client sends the last one " +
	"it saw as `last_seq`.\n" +
	"- **Channels.** `host`, `caller` and `agent` are the three roles of the same endpoint " +
	"`/v1/ws`; `frames` is the WebRTC data channel. In AsyncAPI 2 wording, `publish` lists the " +
	"frames a client sends to the broker and `subscribe` those the broker sends to the client."

// info returns the document's info object.
func info() spec.Info {
	return spec.Info{
		Title:       "Backchannel protocol",
		Version:     frames.Protocol,
		Description: infoDescription,
		Contact:     &spec.Contact{Name: "Backchannel", URL: repositoryURL},
		// The project has chosen no license: its code is not licensed for use by others (npm's
		// "UNLICENSED", as in sdk/js/package.json). Change it here when a license is chosen.
		License: &spec.License{Name: "UNLICENSED", URL: repositoryURL},
	}
}

// servers returns the document's servers: the broker's WebSocket endpoint and the WebRTC peer
// connection a caller opens with it.
func servers() map[string]spec.ServersAdditionalProperties {
	host := map[string]spec.ServerVariable{
		"host": {
			Default: "127.0.0.1:8080",
			Description: "Host and port of the broker: `backchannel serve --addr` (default " +
				"`127.0.0.1:8080`), or the public name of a deployment.",
		},
	}
	return map[string]spec.ServersAdditionalProperties{
		serverWebSocket: {Server: &spec.Server{
			URL:      "{host}/v1/ws",
			Protocol: "ws",
			Description: "The broker's WebSocket endpoint. Use `wss` when the broker is served over TLS. " +
				"The role a connection plays is named in its `hello`, not in the URL.",
			Variables: host,
		}},
		serverWebRTC: {Server: &spec.Server{
			URL:      "{host}",
			Protocol: "webrtc",
			Description: "A caller's WebRTC peer connection with the broker: PCMU audio both ways and the " +
				"data channel `frames`.",
			Variables: host,
		}},
	}
}

// roleTags returns the document's tags: one per role, described by the doc comment of its
// frames.Role constant.
func roleTags(src sources) []spec.Tag {
	var tags []spec.Tag
	for _, r := range frames.Role("").Enum() {
		name := r.(string)
		tags = append(tags, spec.Tag{Name: name, Description: src.Values["Role."+name]})
	}
	return tags
}
