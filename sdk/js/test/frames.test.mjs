// Checks the SDK's frame types, tables, decoder and builders against the project's shared
// fixtures: frames/testdata/examples.json (one example of every frame) and docs/asyncapi.json
// (generated from the Go package frames: every frame's direction, fields and required fields).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

import * as sdk from "../dist/index.js";

const repo = new URL("../../../", import.meta.url);
const examples = JSON.parse(readFileSync(fileURLToPath(new URL("frames/testdata/examples.json", repo)), "utf8"));
const asyncapi = JSON.parse(readFileSync(fileURLToPath(new URL("docs/asyncapi.json", repo)), "utf8"));

// The direction of every frame type, from the AsyncAPI document's messages.
const direction = new Map();
for (const m of Object.values(asyncapi.components.messages)) {
  const prev = direction.get(m.name);
  assert.ok(prev === undefined || prev === m["x-direction"], `${m.name} has two directions`);
  direction.set(m.name, m["x-direction"]);
}
// The schema of every frame type, by its "type" const.
const schemaOf = new Map();
for (const s of Object.values(asyncapi.components.schemas)) {
  const c = s.properties?.type?.const;
  if (c) schemaOf.set(c, s);
}

const sorted = (xs) => [...xs].sort();

test("every example has a direction", () => {
  for (const type of Object.keys(examples)) {
    assert.ok(direction.has(type), `examples.json has ${type}, which docs/asyncapi.json does not know`);
    assert.equal(examples[type].type, type);
  }
});

test("the SDK's server frame types are the broker → client types of examples.json", () => {
  const brokerTypes = Object.keys(examples).filter((t) => direction.get(t) === "broker");
  assert.deepEqual(sorted(sdk.SERVER_FRAME_TYPES), sorted(brokerTypes));
  // and every broker → client type the AsyncAPI document knows
  assert.deepEqual(sorted(sdk.SERVER_FRAME_TYPES), sorted([...direction].filter(([, d]) => d === "broker").map(([t]) => t)));
});

test("the SDK sends client → broker frames only, each with an example", () => {
  for (const t of sdk.CLIENT_FRAME_TYPES) {
    assert.equal(direction.get(t), "client", `${t} is not a client frame`);
    assert.ok(examples[t], `no example of ${t}`);
  }
  // A data-channel caller and host may send exactly these (the "frames" channel).
  const dc = asyncapi.channels.frames.publish.message.oneOf.map((r) => asyncapi.components.messages[r.$ref.split("/").pop()].name);
  assert.deepEqual(sorted(sdk.CLIENT_FRAME_TYPES), sorted(dc));
});

function checkTable(what, table, schema) {
  const fields = Object.keys(schema.properties).filter((f) => f !== "type");
  assert.deepEqual(sorted(Object.keys(table)), sorted(fields), `${what}: the SDK's fields differ from the Go frame's`);
  const required = (schema.required ?? []).filter((f) => f !== "type");
  const sdkRequired = Object.entries(table).filter(([, [, r]]) => r === "req").map(([f]) => f);
  assert.deepEqual(sorted(sdkRequired), sorted(required), `${what}: the SDK's required fields differ from the Go frame's`);
}

test("the SDK's field tables (and so its TypeScript interfaces) match the Go frames", () => {
  for (const t of sdk.SERVER_FRAME_TYPES) checkTable(t, sdk.SERVER_FIELDS[t], schemaOf.get(t));
  for (const t of sdk.CLIENT_FRAME_TYPES) checkTable(t, sdk.CLIENT_FIELDS[t], schemaOf.get(t));
  checkTable("Interaction", sdk.NESTED_FIELDS.interaction, asyncapi.components.schemas.Interaction);
  checkTable("ResumedJob", sdk.NESTED_FIELDS.resumed_job, asyncapi.components.schemas.ResumedJob);
  checkTable("ToolDecl", sdk.NESTED_FIELDS.tool_decl, asyncapi.components.schemas.ToolDecl);
});

test("every broker → client example decodes to the same JSON", () => {
  for (const t of sdk.SERVER_FRAME_TYPES) {
    const ex = examples[t];
    const f = sdk.decodeServerFrame(JSON.stringify(ex));
    assert.deepEqual(f, ex, t);
    for (const k of Object.keys(ex)) {
      assert.ok(k === "type" || k in sdk.SERVER_FIELDS[t], `${t}: the example's field ${k} is unknown to the SDK`);
    }
  }
});

test("every client → broker example the SDK sends passes its checks and is what its builder makes", () => {
  const ex = examples;
  const built = {
    "hello": sdk.helloFrame({
      id: ex.hello.id, role: ex.hello.role, sessionId: ex.hello.session_id, resumeToken: ex.hello.resume_token,
      lastSeq: ex.hello.last_seq, tools: ex.hello.tools,
    }),
    "tools.declare": sdk.toolsDeclareFrame(ex["tools.declare"].tools, ex["tools.declare"].id),
    "tool_deferred": sdk.toolDeferredFrame(ex.tool_deferred.call_id,
      { handle: ex.tool_deferred.handle, statusLabel: ex.tool_deferred.status_label }, ex.tool_deferred.id),
    "tool_progress": sdk.toolProgressFrame(ex.tool_progress.handle, ex.tool_progress.note, ex.tool_progress.id),
    "tool_partial_result": sdk.toolPartialResultFrame(ex.tool_partial_result.handle, ex.tool_partial_result.segment, {
      reply: ex.tool_partial_result.reply, phase: ex.tool_partial_result.phase, interaction: ex.tool_partial_result.interaction,
    }, ex.tool_partial_result.id),
    "tool_result": sdk.toolResultFrame(ex.tool_result.call_id, ex.tool_result.output, ex.tool_result.id),
    "job.cancel": sdk.jobCancelFrame(ex["job.cancel"].handle, ex["job.cancel"].id),
    "tool_interaction_update": sdk.toolInteractionUpdateFrame(ex.tool_interaction_update.call_id,
      ex.tool_interaction_update.interaction_id, ex.tool_interaction_update.state, ex.tool_interaction_update.id),
    "inject": sdk.injectFrame(ex.inject.text, { speak: ex.inject.speak }, ex.inject.id),
    "session.end": sdk.sessionEndFrame(ex["session.end"].id),
    "caller.text": sdk.callerTextFrame(ex["caller.text"].text, ex["caller.text"].id),
  };
  assert.deepEqual(sorted(Object.keys(built)), sorted(sdk.CLIENT_FRAME_TYPES));
  for (const t of sdk.CLIENT_FRAME_TYPES) {
    sdk.checkClientFrame(ex[t]);
    assert.deepEqual(JSON.parse(sdk.encodeClientFrame(built[t])), ex[t], t);
    assert.ok(sdk.encodeClientFrame(built[t]).startsWith(`{"type":${JSON.stringify(t)}`), `${t}: type is not first`);
  }
});

test("the decoder refuses what the broker would call bad_frame, and passes unknown types on", () => {
  assert.throws(() => sdk.decodeServerFrame("{"), sdk.FrameDecodeError);
  assert.throws(() => sdk.decodeServerFrame("[]"), /must be a JSON object/);
  assert.throws(() => sdk.decodeServerFrame(`{"type":"tool_call","seq":1}`), /missing required field call_id/);
  const bad = { ...examples.tool_call, timeout_ms: "15s" };
  assert.throws(() => sdk.decodeServerFrame(JSON.stringify(bad)), /field timeout_ms must be an integer/);
  const badJob = structuredClone(examples.tool_deferred_resume);
  delete badJob.jobs[0].handle;
  assert.throws(() => sdk.decodeServerFrame(JSON.stringify(badJob)), /missing required field jobs\[0\]\.handle/);
  const future = { type: "tool_job_hologram", seq: 9, beam: true };
  assert.deepEqual(sdk.decodeServerFrame(JSON.stringify(future)), future);
  // Unknown fields are kept and ignored (SPEC 2).
  assert.equal(sdk.decodeServerFrame(JSON.stringify({ ...examples.transcript, lang: "en" })).lang, "en");
});

test("a job reference names a call id or a handle", () => {
  assert.deepEqual(sdk.jobTarget("call_k3v7qmx2d5rwpa4ntf6h"), { call_id: "call_k3v7qmx2d5rwpa4ntf6h" });
  assert.deepEqual(sdk.jobTarget("booking-8841"), { handle: "booking-8841" });
  assert.deepEqual(sdk.jobTarget("call_K3V7QMX2D5RWPA4NTF6H"), { handle: "call_K3V7QMX2D5RWPA4NTF6H" });
  assert.deepEqual(sdk.jobTarget({ callId: "call_x" }), { call_id: "call_x" });
  assert.deepEqual(sdk.jobTarget({ handle: "h" }), { handle: "h" });
  assert.throws(() => sdk.jobTarget(""), TypeError);
});

test("µ-law is G.711 as internal/g711 has it", () => {
  assert.equal(sdk.ulawEncode(0), 0xff);
  assert.equal(sdk.ulawDecode(0xff), 0);
  assert.equal(sdk.ulawDecode(0x00), -32124);
  assert.equal(sdk.ulawDecode(0x80), 32124);
  for (let b = 0; b < 256; b++) {
    // every code decodes to a value that encodes back to it (0x7f and 0xff are both zero)
    const v = sdk.ulawDecode(b);
    const back = sdk.ulawEncode(v);
    assert.ok(back === b || (v === 0 && (back === 0xff || back === 0x7f)), `code ${b}: ${v} → ${back}`);
  }
});
