// Drives the Client against a scripted fake broker (a TransportFactory of the test's own): the
// frames it sends for each method (against frames/testdata/examples.json), answers and
// rejections, dedup by seq, and reconnect → resume → replay → tool_deferred_resume.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

import * as sdk from "../dist/index.js";

const examples = JSON.parse(readFileSync(fileURLToPath(new URL("../../../frames/testdata/examples.json", import.meta.url)), "utf8"));
const PROBE = "call_00000000000000000000";
const CALL = "call_k3v7qmx2d5rwpa4ntf6h";

const tick = () => new Promise((r) => setTimeout(r, 0));

/** Waits until cond() holds (polling), or fails after ms. */
async function until(cond, what, ms = 2000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

/**
 * A fake broker behind a TransportFactory: each open() is one connection. It answers hello
 * with welcome (or with `refuse`), barriers with job.cancel_result, keeps a slot outbox of
 * every frame it sent with its seq, and replays after last_seq on a resume.
 */
class FakeBroker {
  constructor() {
    this.conns = [];
    this.outbox = []; // every seq'd frame, for replay
    this.seq = 0;
    this.received = []; // every frame from the client, all connections
    this.autoBarrier = true;
    this.refuse = null; // an error frame to answer the next hello with
    this.refuseTools = ""; // the bad_frame message that refuses a hello's tools
    this.failOpens = 0; // open() fails this many times
    this.resumeTokens = 0;
    this.onHello = null;
    this.factory = { open: (p, ev) => this.open(p, ev) };
  }

  async open(params, ev) {
    if (this.failOpens > 0) {
      this.failOpens--;
      throw new Error("connection refused");
    }
    const conn = { params, ev, open: true, frames: [] };
    this.conns.push(conn);
    return {
      kind: "fake",
      send: (text) => this.fromClient(conn, JSON.parse(text)),
      close: () => {
        conn.open = false;
      },
    };
  }

  get conn() {
    return this.conns[this.conns.length - 1];
  }

  /** Sends a frame to the current connection (seq'd unless it is a welcome or noSeq). */
  push(frame, { noSeq = false } = {}) {
    let f = frame;
    if (!noSeq && f.type !== "welcome") {
      f = { ...frame, seq: ++this.seq };
      this.outbox.push(f);
    }
    this.conn.ev.message(JSON.stringify(f));
    return f;
  }

  /** Sends a frame again, as it was (a duplicate). */
  raw(frame) {
    this.conn.ev.message(JSON.stringify(frame));
  }

  /** Drops the current connection from the broker's side. */
  drop() {
    const c = this.conn;
    c.open = false;
    c.ev.closed("test drop");
  }

  fromClient(conn, f) {
    conn.frames.push(f);
    this.received.push(f);
    if (f.type === "hello") {
      this.onHello?.(f);
      if (this.refuse) {
        const e = this.refuse;
        this.refuse = null;
        queueMicrotask(() => conn.ev.message(JSON.stringify({ type: "error", ref: f.id, ...e })));
        return;
      }
      queueMicrotask(() => {
        conn.ev.message(JSON.stringify({
          type: "welcome", ref: f.id, session_id: f.session_id ?? "ses_new", connection_id: "conn_" + this.conns.length,
          resume_token: `rt_${++this.resumeTokens}_xxxxxxxxxxxxxxxxxxxx`, resume_window_ms: 2000, heartbeat_ms: 15000,
          server_time_ms: Date.now(), ...(f.session_id ? {} : { join_token: "jt_new" }),
        }));
        if (f.resume_token) {
          for (const o of this.outbox) if (o.seq > f.last_seq) conn.ev.message(JSON.stringify(o));
          this.afterReplay?.();
        }
        if (f.tools && this.refuseTools) {
          this.push({ type: "error", ref: f.id, code: "bad_frame", message: this.refuseTools, retryable: false });
        } else if (f.tools) {
          this.push({ type: "tools.declared", ref: f.id, names: f.tools.map((t) => t.name) });
        }
      });
      return;
    }
    if (f.type === "job.cancel" && f.call_id === PROBE && this.autoBarrier) {
      queueMicrotask(() => this.push({ type: "job.cancel_result", ref: f.id, call_id: "", result: "unknown_call" }));
    }
  }

  /** The client frames of a type, all connections. */
  sent(type) {
    return this.received.filter((f) => f.type === type && !(f.type === "job.cancel" && f.call_id === PROBE));
  }
}

async function connected(opts = {}) {
  const b = new FakeBroker();
  const c = new sdk.Client();
  const frames = [];
  c.on("frame", (f) => frames.push(f));
  await c.connect({ url: "http://broker.test", sessionId: "ses_q7h2m4xk9t", joinToken: "jt_1", transportFactory: b.factory, ...opts });
  return { b, c, frames };
}

const withoutId = ({ id, ...rest }) => rest;

test("connect says hello with the join token and the tools, and reports the welcome", async () => {
  const b = new FakeBroker();
  const c = new sdk.Client();
  const declared = c.declareTools(examples["tools.declare"].tools);
  const w = await c.connect({ url: "http://broker.test/", sessionId: "ses_1", joinToken: "jt_1", transportFactory: b.factory });
  assert.equal(w.session_id, "ses_1");
  assert.equal(c.state, "open");
  assert.equal(c.resumeToken, w.resume_token);
  const hello = b.conn.frames[0];
  assert.deepEqual(withoutId(hello), {
    type: "hello", protocol: "backchannel.v1", role: "caller", session_id: "ses_1", join_token: "jt_1",
    tools: examples["tools.declare"].tools,
  });
  assert.ok(hello.id && hello.id.length <= 64);
  assert.deepEqual(await declared, ["lookup_order", "refund_order", "export_report"]);
  assert.equal(b.conn.params.bearer, "jt_1");
  assert.equal(b.conn.params.baseURL, "http://broker.test");
  c.close();
  assert.equal(c.state, "closed");
});

test("an API key alone creates a session over WebSocket: the welcome's join token is kept", async () => {
  const b = new FakeBroker();
  const c = new sdk.Client();
  await c.connect({ url: "ws://broker.test/v1/ws", apiKey: "dev", transport: "websocket", role: "host", transportFactory: b.factory });
  assert.deepEqual(withoutId(b.conn.frames[0]), { type: "hello", protocol: "backchannel.v1", role: "host", api_key: "dev" });
  assert.equal(c.sessionId, "ses_new");
  assert.equal(c.joinToken, "jt_new");
  c.close();
});

test("each method sends the frame of examples.json", async () => {
  const { b, c } = await connected();
  const ex = examples;
  // fn sends the frame; answer, if given, answers it as the broker would
  const expectSent = async (type, fn, answer) => {
    const before = b.sent(type).length;
    const p = fn();
    await tick();
    const got = b.sent(type).slice(before);
    assert.equal(got.length, 1, type);
    assert.deepEqual(withoutId(got[0]), withoutId(ex[type]), type);
    if (answer) b.push({ ...answer, ref: got[0].id });
    return p;
  };
  const ack = await expectSent("tool_deferred",
    () => c.sendToolDeferred(ex.tool_deferred.call_id, { handle: ex.tool_deferred.handle, statusLabel: ex.tool_deferred.status_label }),
    ex.tool_deferred_ack);
  assert.equal(ack.accepted, true);
  await expectSent("tool_progress", () => c.sendProgress(ex.tool_progress.handle, ex.tool_progress.note));
  const partial = await expectSent("tool_partial_result", () => c.sendPartialResult(ex.tool_partial_result.handle, ex.tool_partial_result.segment, {
    reply: true, phase: ex.tool_partial_result.phase, interaction: ex.tool_partial_result.interaction,
  }));
  assert.equal(partial.interactionId, "ia_pick_time_1");
  await expectSent("tool_result", () => c.sendResult(ex.tool_result.call_id, ex.tool_result.output));
  await expectSent("inject", () => c.inject(ex.inject.text, { speak: false }));
  await expectSent("caller.text", () => c.say(ex["caller.text"].text));
  const cancelled = await expectSent("job.cancel", () => c.cancelJob(ex["job.cancel"].handle), ex["job.cancel_result"]);
  assert.equal(cancelled.result, "cancelled");
  const upd = await expectSent("tool_interaction_update",
    () => c.updateInteraction(ex.tool_interaction_update.call_id, ex.tool_interaction_update.interaction_id, "resolved"),
    ex.tool_interaction_update_ack);
  assert.equal(upd.result, "applied");
  const names = await expectSent("tools.declare", () => c.declareTools(ex["tools.declare"].tools),
    { type: "tools.declared", names: ["lookup_order", "refund_order", "export_report"] });
  assert.deepEqual(names, ["lookup_order", "refund_order", "export_report"]);
  // an interaction without an id gets one
  const ask = c.ask("booking-8841", { prompt: "Which time?", options: ["7:30", "8:15"] });
  await tick();
  assert.match(b.sent("tool_partial_result").at(-1).interaction.id, /^ia_[a-z0-9]{20}$/);
  assert.equal(b.sent("tool_partial_result").at(-1).segment, "Which time?");
  assert.match(await ask, /^ia_/);

  const end = c.end();
  await tick();
  assert.deepEqual(withoutId(b.sent("session.end").at(-1)), withoutId(ex["session.end"]));
  b.push({ type: "session.ended", reason: "ended" });
  await end;
  assert.equal(c.state, "ended");
  await assert.rejects(c.say("hello?"), sdk.SessionEndedError);
});
test("a refused defer rejects with DeferRejectedError and its reason; an accepted one resolves with the ack", async () => {
  const { b, c } = await connected();
  const p = c.sendToolDeferred(CALL, { handle: "call_aaaaaaaaaaaaaaaaaaaa" });
  await tick();
  const f = b.sent("tool_deferred").at(-1);
  b.push({ type: "tool_deferred_ack", ref: f.id, call_id: CALL, handle: f.handle, accepted: false, reason: "handle_reserved" });
  await assert.rejects(p, (e) => e instanceof sdk.DeferRejectedError && e instanceof Error && e.reason === "handle_reserved" &&
    e.handle === "call_aaaaaaaaaaaaaaaaaaaa" && /handle_reserved/.test(e.message));
  const ok = c.sendToolDeferred(CALL, { handle: "booking-1" });
  await tick();
  b.push({ type: "tool_deferred_ack", ref: b.sent("tool_deferred").at(-1).id, call_id: CALL, handle: "booking-1", accepted: true, deadline_ms: 42 });
  assert.equal((await ok).deadline_ms, 42);
  c.close();
});

test("silent requests resolve at the barrier, and reject with the broker's error", async () => {
  const { b, c } = await connected();
  b.autoBarrier = false;
  let done = false;
  const p1 = c.sendProgress("booking-1", "one").then(() => (done = true));
  const p2 = c.sendResult("booking-2", { ok: true });
  await tick();
  // both went out in one batch, followed by one barrier
  const types = b.conn.frames.slice(-3).map((f) => f.type + (f.call_id === PROBE ? "(barrier)" : ""));
  assert.deepEqual(types, ["tool_progress", "tool_result", "job.cancel(barrier)"]);
  assert.equal(done, false);
  const [progress, result, barrier] = b.conn.frames.slice(-3);
  b.push({ type: "error", ref: result.id, code: "call_finished", message: "too late", retryable: false, handle: "booking-2" });
  await assert.rejects(p2, (e) => e instanceof sdk.BrokerError && e.code === "call_finished");
  b.push({ type: "job.cancel_result", ref: barrier.id, call_id: "", result: "unknown_call" });
  await p1;
  assert.equal(done, true);
  assert.ok(progress.id);
  c.close();
});

test("frames with a seq already seen are dropped; every frame is an event of its type and of frame", async () => {
  const { b, c, frames } = await connected();
  const narrations = [];
  c.on("tool_job_narration", (f) => narrations.push(f));
  const n = b.push(examples.tool_job_narration);
  b.raw(n); // the same seq again
  b.push({ ...examples.tool_job_narration, state: "delivered" });
  assert.deepEqual(narrations.map((f) => f.state), ["speaking", "delivered"]);
  assert.equal(frames.filter((f) => f.type === "tool_job_narration").length, 2);
  assert.equal(c.lastSeq, b.seq);
  c.close();
});

test("onToolCall: a returned value is the result, a thrown error the error, undefined leaves it to the handler", async () => {
  const { b, c } = await connected();
  let slowCall = null;
  c.onToolCall(async (call) => {
    if (call.name === "lookup") return { temp: 21 };
    if (call.name === "broken") throw new Error("no such city");
    slowCall = call;
    await call.defer("slow-" + call.callId.slice(5), "working slowly");
    await call.progress("started");
    return undefined;
  });
  const call = (name, id) => b.push({ type: "tool_call", call_id: id, name, arguments: {}, deferred: true, timeout_ms: 10000, session_id: "ses_q7h2m4xk9t" });
  call("lookup", "call_aaaaaaaaaaaaaaaaaaaa");
  call("broken", "call_bbbbbbbbbbbbbbbbbbbb");
  call("slow", "call_cccccccccccccccccccc");
  await until(() => b.sent("tool_result").length === 2 && b.sent("tool_deferred").length === 1, "the answers");
  const results = b.sent("tool_result").map(withoutId);
  assert.deepEqual(results, [
    { type: "tool_result", call_id: "call_aaaaaaaaaaaaaaaaaaaa", output: { temp: 21 } },
    { type: "tool_result", call_id: "call_bbbbbbbbbbbbbbbbbbbb", error: "no such city" },
  ]);
  const d = b.sent("tool_deferred")[0];
  b.push({ type: "tool_deferred_ack", ref: d.id, call_id: d.call_id, handle: d.handle, accepted: true, deadline_ms: 1 });
  await until(() => b.sent("tool_progress").length === 1, "the progress by handle");
  assert.deepEqual(withoutId(b.sent("tool_progress")[0]), { type: "tool_progress", handle: "slow-cccccccccccccccccccc", note: "started" });
  assert.equal(c.jobs.get("call_cccccccccccccccccccc").state, "deferred");
  assert.equal(c.jobs.get("call_aaaaaaaaaaaaaaaaaaaa").state, "completed");
  // a tool_cancel aborts the call's signal, with the reason
  b.push({ type: "tool_cancel", call_id: "call_cccccccccccccccccccc", handle: "slow-cccccccccccccccccccc", reason: "caller_request" });
  assert.equal(c.jobs.get("call_cccccccccccccccccccc").state, "cancelled");
  assert.equal(slowCall.signal.aborted, true);
  assert.equal(slowCall.signal.reason, "caller_request");
  c.close();
});

test("a drop resumes with the latest resume token and last_seq, replays, resends, and reports the open jobs", async () => {
  const { b, c, frames } = await connected({ reconnect: { initialDelayMs: 5, maxDelayMs: 20 } });
  const events = [];
  for (const e of ["dropped", "reconnecting", "resumed", "closed"]) c.on(e, (v) => events.push([e, v]));
  // a deferred job, acknowledged
  b.push({ type: "tool_call", call_id: CALL, name: "book_table", arguments: { party: 4 }, deferred: true, timeout_ms: 10000, session_id: "ses_q7h2m4xk9t" });
  const d = c.sendToolDeferred(CALL, { handle: "booking-8841" });
  await tick();
  b.push({ type: "tool_deferred_ack", ref: b.sent("tool_deferred")[0].id, call_id: CALL, handle: "booking-8841", accepted: true, deadline_ms: 99 });
  await d;
  const tokenBefore = c.resumeToken;
  const seqBefore = c.lastSeq;

  // Requests in flight when the transport drops: no answers come for them on this connection.
  b.autoBarrier = false;
  const cancel = c.cancelJob("other-job"); // answered: the broker never read it → resent
  const milestone = c.sendPartialResult("booking-8841", "halfway", { reply: true }).then(() => null, (e) => e); // silent, unsafe to repeat
  const progress = c.sendProgress("booking-8841", "still going"); // silent, safe to repeat
  await tick();
  // The broker made a frame meanwhile (the client will see it only through the replay).
  b.drop();
  b.autoBarrier = true;
  b.outbox.push({ type: "tool_job_narration", seq: ++b.seq, call_id: CALL, handle: "booking-8841", kind: "milestone", state: "queued", attempt: 1 });
  b.afterReplay = () => b.push({
    type: "tool_deferred_resume",
    jobs: [{ call_id: CALL, handle: "booking-8841", name: "book_table", arguments: { party: 4 }, status_label: "", state: "deferred", deadline_ms: 99 }],
  });
  await until(() => events.some(([e]) => e === "resumed"), "resumed");
  const hello = b.conn.frames[0];
  assert.deepEqual(withoutId(hello), {
    type: "hello", protocol: "backchannel.v1", role: "caller", session_id: "ses_q7h2m4xk9t", resume_token: tokenBefore, last_seq: seqBefore,
  });
  // the sync barrier went first, then the resends
  assert.equal(b.conn.frames[1].type, "job.cancel");
  assert.equal(b.conn.frames[1].call_id, PROBE);
  assert.notEqual(c.resumeToken, tokenBefore);
  const resumed = events.find(([e]) => e === "resumed")[1];
  assert.deepEqual(resumed.jobs.map((j) => j.handle), ["booking-8841"]);
  assert.equal(resumed.calls[0].callId, CALL);
  assert.equal(resumed.calls[0].handle, "booking-8841");
  // the replayed narration arrived once; the replay of earlier frames was dropped by seq
  assert.equal(frames.filter((f) => f.type === "tool_job_narration").length, 1);
  assert.equal(frames.filter((f) => f.type === "tool_call").length, 1);
  assert.equal(frames.filter((f) => f.type === "tool_deferred_resume").length, 1);
  assert.ok((await milestone) instanceof sdk.UnconfirmedError);
  await progress; // resent and confirmed
  const resentCancel = b.conn.frames.find((f) => f.type === "job.cancel" && f.handle === "other-job");
  assert.ok(resentCancel, "job.cancel resent after the resume");
  b.push({ type: "job.cancel_result", ref: resentCancel.id, call_id: "", result: "unknown_call" });
  assert.equal((await cancel).result, "unknown_call");
  assert.deepEqual(events.map(([e]) => e).slice(0, 2), ["dropped", "reconnecting"]);
  assert.equal(c.state, "open");
  c.close();
});

test("reconnect backs off with jitter between failed attempts, and a refused resume stops it", async () => {
  const { b, c } = await connected({ reconnect: { initialDelayMs: 10, maxDelayMs: 40, multiplier: 2, jitter: 0.5 } });
  const delays = [];
  let closed = null;
  c.on("reconnecting", ({ attempt, delayMs }) => delays.push([attempt, delayMs]));
  c.on("closed", (v) => (closed = v));
  b.failOpens = 4;
  b.refuse = { code: "resume_expired", message: "the resume window of this slot has passed", retryable: false };
  b.drop();
  await until(() => closed !== null, "closed");
  assert.equal(c.state, "closed");
  assert.ok(closed.error instanceof sdk.BrokerError && closed.error.code === "resume_expired", String(closed.error));
  assert.deepEqual(delays.map(([a]) => a), [1, 2, 3, 4, 5]);
  assert.equal(delays[0][1], 0);
  const bounds = [[5, 15], [10, 30], [20, 60], [20, 60]]; // 10·2^n capped at 40, ± 50 %
  delays.slice(1).forEach(([, d], i) => assert.ok(d >= bounds[i][0] && d <= bounds[i][1], `attempt ${i + 2}: ${d} ms`));
});

test("reconnect gives up after the resume window", async () => {
  const { b, c } = await connected({ reconnect: { initialDelayMs: 20, maxDelayMs: 20, maxElapsedMs: 100 } });
  let closed = null;
  c.on("closed", (v) => (closed = v));
  b.failOpens = 1000;
  b.drop();
  await until(() => closed !== null, "closed", 3000);
  assert.ok(closed.error instanceof sdk.ClosedError && /gave up resuming/.test(closed.error.message), String(closed.error));
});

test("session.ended rejects what is still open with SessionEndedError", async () => {
  const { b, c } = await connected();
  b.autoBarrier = false;
  const p = c.sendProgress("booking-1", "x");
  const ended = new Promise((r) => c.on("session.ended", r));
  await tick();
  b.push({ type: "session.ended", reason: "hung_up" });
  assert.equal((await ended).reason, "hung_up");
  await assert.rejects(p, (e) => e instanceof sdk.SessionEndedError && e.reason === "hung_up");
  assert.equal(c.state, "ended");
});

test("a new client resumes a slot from resumeState(): replay, tool_deferred_resume, and a ToolCall to finish the job", async () => {
  const { b, c } = await connected();
  b.push({ type: "tool_call", call_id: CALL, name: "book_table", arguments: { party: 4 }, deferred: true, timeout_ms: 10000, session_id: "ses_q7h2m4xk9t" });
  const state = c.resumeState();
  assert.deepEqual(Object.keys(state).sort(), ["joinToken", "lastSeq", "resumeToken", "sessionId"]);
  assert.equal(state.lastSeq, 1);
  // The page reloads: the old client is gone without a word; the broker made a frame meanwhile.
  b.conn.open = false;
  b.outbox.push({ type: "transcript", seq: ++b.seq, role: "agent", text: "Still there?", final: true });
  b.afterReplay = () => b.push({
    type: "tool_deferred_resume",
    jobs: [{ call_id: CALL, handle: "booking-8841", name: "book_table", arguments: { party: 4 }, status_label: "booking", state: "deferred", deadline_ms: 99 }],
  });
  const c2 = new sdk.Client();
  const seen = [];
  c2.on("frame", (f) => seen.push(f.type));
  const resumed = new Promise((r) => c2.on("resumed", r));
  await c2.connect({ url: "http://broker.test", resume: state, transportFactory: b.factory });
  assert.deepEqual(withoutId(b.conn.frames[0]), {
    type: "hello", protocol: "backchannel.v1", role: "caller", session_id: "ses_q7h2m4xk9t", resume_token: state.resumeToken, last_seq: 1,
  });
  const { jobs, calls } = await resumed;
  assert.equal(jobs.length, 1);
  assert.deepEqual(seen.filter((t) => t !== "job.cancel_result"), ["welcome", "transcript", "tool_deferred_resume"]);
  assert.equal(calls[0].handle, "booking-8841");
  assert.equal(c2.jobs.get(CALL).statusLabel, "booking");
  await calls[0].result({ ok: true });
  assert.deepEqual(withoutId(b.sent("tool_result").at(-1)), { type: "tool_result", handle: "booking-8841", output: { ok: true } });
  assert.equal(c2.jobs.get(CALL).state, "completed");
  c2.close();
  c.close();
});

test("call.answer resolves with the caller's answer to the job's interaction, and rejects when the job is cancelled", async () => {
  const { b, c } = await connected();
  const calls = [];
  c.onToolCall((call) => {
    calls.push(call);
  });
  b.push({ type: "tool_call", call_id: CALL, name: "book_table", arguments: {}, deferred: true, timeout_ms: 10000, session_id: "s" });
  b.push({ type: "tool_call", call_id: "call_dddddddddddddddddddd", name: "book_table", arguments: {}, deferred: true, timeout_ms: 10000, session_id: "s" });
  await until(() => calls.length === 2, "the calls");
  const answer = calls[0].answer("ia_1");
  const never = calls[1].answer();
  b.push({ type: "tool_interaction_answer", call_id: CALL, interaction_id: "ia_0", text: "old" });
  b.push({ type: "tool_interaction_answer", call_id: CALL, interaction_id: "ia_1", option: "8:15", text: "eight fifteen" });
  assert.equal((await answer).option, "8:15");
  b.push({ type: "tool_cancel", call_id: "call_dddddddddddddddddddd", reason: "timeout" });
  await assert.rejects(never, /was cancelled \(timeout\)/);
  c.close();
});

test("declareTools before connect rejects when the broker refuses the hello's tools", async () => {
  const b = new FakeBroker();
  const c = new sdk.Client();
  const declared = c.declareTools([{ name: "wait", description: "reserved", parameters: { type: "object" } }]).then(() => null, (e) => e);
  b.refuseTools = 'tool "wait": the name is reserved';
  await c.connect({ url: "http://broker.test", sessionId: "s", joinToken: "j", transportFactory: b.factory });
  const e = await declared;
  assert.ok(e instanceof sdk.BrokerError && e.code === "bad_frame", String(e));
  c.close();
});

test("a frame over the broker's limit is not confirmed by the barrier after it: the ref-less limit_exceeded fails it", async () => {
  const { b, c } = await connected();
  b.autoBarrier = false;
  const p = c.sendProgress("booking-1", "x".repeat(100)).then(() => null, (e) => e);
  await tick();
  const barrier = b.conn.frames.find((f) => f.type === "job.cancel" && f.call_id === PROBE);
  assert.ok(barrier, "a barrier follows the progress note");
  // What the broker answers a frame over its limit: an error without ref, then the barrier's answer.
  b.push({ type: "error", code: "limit_exceeded", message: "frame of 5000 bytes is over the limit of 4096 bytes", retryable: false });
  b.push({ type: "job.cancel_result", ref: barrier.id, call_id: "", result: "unknown_call" });
  const e = await p;
  assert.ok(e instanceof sdk.BrokerError && e.code === "limit_exceeded", String(e));
  // The limit counts UTF-8 bytes: 400000 "€" are 400000 UTF-16 units but 1.2 MB.
  await assert.rejects(c.sendProgress("booking-1", "€".repeat(400000)),
    (err) => !(err instanceof sdk.BrokerError) && /frame of 1200\d+ bytes is over the broker's frame limit of 1048576 bytes/.test(err.message));
  assert.equal(b.sent("tool_progress").length, 1);
  c.close();
});

test("close() while reconnecting clears the backoff timer", async () => {
  const { b, c } = await connected({ reconnect: { initialDelayMs: 60000, maxDelayMs: 60000, maxElapsedMs: 600000 } });
  const timers = () => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
  const before = timers();
  b.failOpens = 1;
  const waiting = new Promise((r) => c.on("reconnecting", ({ attempt }) => attempt === 2 && r()));
  b.drop();
  await waiting;
  assert.equal(timers(), before + 1, "the backoff wait is one timer");
  c.close();
  assert.equal(c.state, "closed");
  assert.equal(timers(), before, "close() cleared it");
});
