// The try-it page: the caller and a host of one session at once, through the browser SDK
// (sdk.js, built from sdk/js). Plain DOM code, no framework, no build step.
import { BARRIER_CALL_ID, Client, DeferRejectedError, UnconfirmedError } from "./sdk.js";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);

// The demo tool: a slow booking that the page runs itself (SPEC 4: a background job).
const BOOK_TABLE = {
  name: "book_table",
  description: "Books a table at the restaurant; the restaurant confirms later.",
  parameters: {
    type: "object",
    properties: {
      party: { type: "integer", minimum: 1, description: "how many people" },
      time: { type: "string", description: "when, if the caller said" },
    },
  },
  deferred: true,
  deferred_timeout: "1h",
  expected_duration: "minutes",
};

// What the page knows, for the views and for tests (window.backchannelPage).
const page = {
  client: null,
  /** Every frame, in order: { dir: "in" | "out", frame }. */
  frames: [],
  /** Every SDK event the tests look at: { name, value }. */
  events: [],
  /** Every timeline entry streamed so far. */
  timeline: [],
  /** Closes the peer connection under the SDK's feet (a dropped transport). */
  dropTransport() {
    const pc = page.client?.peerConnection;
    if (!pc) throw new Error("no peer connection");
    pc.close();
  },
  /** Bytes of agent audio received as WebSocket messages. */
  webSocketAudioBytes: 0,
  /** The bytes of agent audio received so far: RTP payloads (inbound-rtp, audio) over WebRTC, messages over WebSocket. */
  async audioBytesReceived() {
    if (!page.client?.peerConnection) return page.webSocketAudioBytes;
    const stats = await page.client.getStats();
    let bytes = 0;
    stats?.forEach((s) => {
      if (s.type === "inbound-rtp" && s.kind === "audio") bytes += s.bytesReceived ?? 0;
    });
    return bytes;
  },
};
window.backchannelPage = page;

const jobs = new Map(); // call id → { call, li, narrations: Map, done, stop: AbortController, answer }
const decisions = new Map(); // interaction id → { callId, li }
let timelineAbort = null;

// ---- the connect form ----

if (params.get("session")) {
  $("session-id").value = params.get("session");
  // caller_url carries the caller token; a link made by hand may carry the join token.
  $("join-token").value = params.get("caller_token") ?? params.get("token") ?? "";
  document.querySelector('input[name="mode"][value="join"]').checked = true;
}
if (params.get("transport") === "websocket") {
  document.querySelector('input[name="transport"][value="websocket"]').checked = true;
}

$("connect-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const mode = document.querySelector('input[name="mode"]:checked').value;
  const transport = document.querySelector('input[name="transport"]:checked').value;
  const opts = { transport, microphone: transport === "webrtc", tools: [BOOK_TABLE] };
  if (mode === "new") {
    opts.apiKey = $("api-key").value.trim();
  } else {
    opts.sessionId = $("session-id").value.trim();
    // The broker's caller tokens start with ct_ (docs/protocol.md, Id formats); anything else is
    // taken for the join token.
    const token = $("join-token").value.trim();
    if (token.startsWith("ct_")) opts.callerToken = token;
    else opts.joinToken = token;
  }
  $("connect").disabled = true;
  const client = new Client();
  page.client = client;
  wire(client);
  client.onToolCall(runTool);
  try {
    await client.connect(opts);
  } catch (err) {
    setStatus("closed", `Could not connect: ${err.message}`);
    $("connect").disabled = false;
    return;
  }
  $("say").disabled = false;
  $("hang-up").disabled = false;
  const info = $("session-info");
  info.hidden = false;
  info.textContent = client.joinToken
    ? `session ${client.sessionId} · join token ${client.joinToken}`
    : `session ${client.sessionId} · joined as the caller (caller token)`;
  if (client.joinToken) {
    followTimeline(client);
  } else {
    note("timeline: reading it needs the session's join token or an API key; the caller token reaches only the WebRTC signaling");
  }
});

$("hang-up").addEventListener("click", async () => {
  $("hang-up").disabled = true;
  try {
    await page.client?.hangUp();
  } catch (err) {
    setStatus(page.client?.state ?? "closed", `Hang-up failed: ${err.message}`);
  }
});

$("say-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const text = $("say-text").value.trim();
  if (!text || !page.client) return;
  $("say-text").value = "";
  try {
    await page.client.say(text);
  } catch (err) {
    note(`say failed: ${err.message}`);
  }
});

for (const ex of document.querySelectorAll(".example")) {
  ex.addEventListener("click", () => {
    $("say-text").value = ex.textContent;
    $("say-text").focus();
  });
}

// ---- the SDK's events ----

function wire(client) {
  client.on("frame", (f) => logFrame("in", f));
  client.on("sent", (f) => logFrame("out", f));
  client.on("state", (s) => {
    const text = {
      connecting: "Connecting…",
      open: "Connected.",
      reconnecting: "The connection dropped: reconnecting…",
      closed: "Disconnected.",
      ended: "The session ended.",
    }[s] ?? s;
    setStatus(s, text);
    if (s === "closed" || s === "ended") {
      $("say").disabled = true;
      $("hang-up").disabled = true;
      $("connect").disabled = false;
      for (const j of jobs.values()) j.stop.abort();
    }
  });
  for (const name of ["connected", "dropped", "reconnecting", "resumed", "closed", "warning"]) {
    client.on(name, (value) => page.events.push({ name, value: summarize(value) }));
  }
  client.on("reconnecting", ({ attempt, delayMs }) => setStatus("reconnecting", `Reconnecting (attempt ${attempt}, after ${delayMs} ms)…`));
  client.on("resumed", ({ jobs: open }) => {
    setStatus("open", `Resumed: ${open.length} open job${open.length === 1 ? "" : "s"} re-attached.`);
    for (const rj of open) {
      const j = jobs.get(rj.call_id);
      if (j) note(`job ${rj.handle} re-attached after the drop`, j);
      if (rj.open_interaction) showDecision(rj.call_id, rj.handle, rj.open_interaction);
      renderJob(rj.call_id);
    }
  });
  client.on("closed", ({ error }) => {
    if (error && client.state === "closed") setStatus("closed", `Disconnected: ${error.message}`);
  });
  client.on("session.ended", (f) => setStatus("ended", `The session ended (${f.reason}).`));
  client.on("transcript", showTranscript);
  client.on("audio", (chunk) => (page.webSocketAudioBytes += chunk.length));
  client.on("tool_job_narration", (f) => {
    const j = jobs.get(f.call_id);
    if (j) {
      const key = f.kind === "interaction" ? `interaction ${f.interaction_id}` : f.kind;
      j.narrations.set(key, { kind: f.kind, state: f.state, attempt: f.attempt });
      renderJob(f.call_id);
      j.narrationWaiters.forEach((w) => w(f));
    }
    if (f.interaction_id) {
      const d = decisions.get(f.interaction_id);
      if (d) {
        d.li.dataset.narrationState = f.state;
        d.li.querySelector(".asked").textContent = `asked: ${f.state} (attempt ${f.attempt})`;
      }
    }
  });
  client.on("tool_interaction_answer", (f) => {
    closeDecision(f.interaction_id, `answered: ${f.option ?? f.text}`);
    jobs.get(f.call_id)?.answer?.(f);
  });
  client.on("tool_cancel", (f) => {
    const j = jobs.get(f.call_id);
    if (j) {
      j.done = true;
      j.stop.abort();
      note(`cancelled: ${f.reason}`, j);
      renderJob(f.call_id);
    }
  });
  client.on("tool_job_delivery_failed", (f) => {
    const j = jobs.get(f.call_id);
    if (j) note(`the completion could not be voiced (${f.reason})`, j);
  });
  client.on("error", (f) => {
    if (!f.ref) note(`error from the broker: ${f.code}: ${f.message}`);
  });
}

// ---- the demo tool, run by the page ----

async function runTool(call) {
  if (call.name !== "book_table") throw new Error(`this page has no tool ${call.name}`);
  const party = Number(call.arguments?.party) || 2;
  const j = newJob(call);
  const label = `booking a table for ${party}`;
  try {
    await call.defer(`table-${randomHex(8)}`, label);
  } catch (err) {
    if (err instanceof DeferRejectedError) note(`defer rejected: ${err.reason}`, j);
    throw err; // the SDK answers the call with the error
  }
  renderJob(call.callId);
  const safely = async (what, p) => {
    // After a drop, the SDK cannot always tell whether a milestone or an ask was applied; the
    // demo goes on rather than repeating it.
    try {
      return await p;
    } catch (err) {
      if (!(err instanceof UnconfirmedError)) throw err;
      note(`${what}: ${err.message}`, j);
      return undefined;
    }
  };
  await call.progress("calling the restaurant");
  await sleep(1500, j.stop.signal);
  if (j.done) return;
  await safely("milestone", call.milestone(`the restaurant has a table for ${party}`));
  await narrationEnds(j, (f) => f.kind === "milestone", 12000);
  if (j.done) return;
  const interaction = { prompt: `Would you like 7:30 or 8:15?`, options: ["7:30", "8:15"] };
  const id = await safely("decision", call.ask(interaction));
  if (id) showDecision(call.callId, call.handle, { ...interaction, id });
  const answer = await new Promise((resolve) => {
    j.answer = resolve;
    j.stop.signal.addEventListener("abort", () => resolve(null), { once: true });
  });
  if (!answer || j.done) return;
  await complete(j, answer.option ?? answer.text);
}

function newJob(call) {
  const li = document.createElement("li");
  li.className = "job";
  li.dataset.callId = call.callId;
  const j = { call, li, narrations: new Map(), narrationWaiters: new Set(), done: false, stop: new AbortController(), notes: [] };
  jobs.set(call.callId, j);
  $("jobs").prepend(li);
  $("jobs-empty").hidden = true;
  renderJob(call.callId);
  return j;
}

/** Completes the job with a confirmation (the caller's choice, or now). */
async function complete(j, time) {
  if (j.done) return;
  j.done = true;
  j.stop.abort();
  const party = Number(j.call.arguments?.party) || 2;
  try {
    await j.call.result({ confirmation: `BC-${randomHex(4).toUpperCase()}`, party, time });
  } catch (err) {
    note(`result failed: ${err.message}`, j);
  }
  for (const [id, d] of decisions) if (d.callId === j.call.callId) closeDecision(id, "closed: the job finished");
  renderJob(j.call.callId);
}

/** Resolves when a narration of the job that matches ends (or after ms). */
function narrationEnds(j, match, ms) {
  const final = new Set(["delivered", "interrupted", "failed", "skipped", "stopped"]);
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      j.narrationWaiters.delete(w);
      resolve();
    };
    const w = (f) => {
      if (match(f) && final.has(f.state)) done();
    };
    const timer = setTimeout(done, ms);
    j.narrationWaiters.add(w);
    j.stop.signal.addEventListener("abort", done, { once: true });
  });
}

function renderJob(callId) {
  const j = jobs.get(callId);
  if (!j) return;
  const info = page.client?.jobs.get(callId);
  const state = info?.state ?? "pending";
  const li = j.li;
  li.dataset.state = state;
  li.dataset.handle = info?.handle ?? "";
  li.replaceChildren();
  const head = el("div", "job-head");
  head.append(el("span", "job-name", `${j.call.name} ${JSON.stringify(j.call.arguments)}`), el("span", "job-state", state));
  li.append(head);
  const meta = [`handle ${info?.handle ?? "—"}`, `call ${callId}`];
  if (info?.statusLabel) meta.push(`“${info.statusLabel}”`);
  if (info?.deadlineMs) meta.push(`deadline ${new Date(info.deadlineMs).toLocaleTimeString()} (${Math.round((info.deadlineMs - Date.now()) / 60000)} min)`);
  li.append(el("div", "job-meta", meta.join(" · ")));
  if (j.narrations.size > 0) {
    const ul = el("ul", "narrations");
    for (const [key, n] of j.narrations) {
      const item = el("li", "", `${key}: ${n.state}${n.attempt > 1 ? ` (attempt ${n.attempt})` : ""}`);
      item.dataset.kind = n.kind;
      item.dataset.state = n.state;
      ul.append(item);
    }
    li.append(ul);
  }
  for (const text of j.notes) li.append(el("div", "job-meta", text));
  if (state === "pending" || state === "deferred") {
    const buttons = el("div", "buttons");
    buttons.append(
      button("Complete now", "complete", () => complete(j, "the first free table")),
      button("Fail", "fail", async () => {
        j.done = true;
        j.stop.abort();
        await j.call.fail("the restaurant is closed").catch((err) => note(err.message, j));
        renderJob(callId);
      }, "secondary"),
      button("Cancel", "cancel", async () => {
        const r = await page.client.cancelJob(j.call.ref).catch((err) => ({ result: err.message }));
        note(`cancel: ${r.result}`, j);
      }, "danger"),
    );
    li.append(buttons);
  }
}

// ---- decisions ----

function showDecision(callId, handle, ia) {
  if (decisions.has(ia.id)) return;
  const li = el("li", "decision");
  li.dataset.interactionId = ia.id;
  li.dataset.callId = callId;
  li.append(el("p", "", ia.prompt), el("p", "job-meta asked", "asked: queued"));
  const buttons = el("div", "buttons");
  for (const option of ia.options ?? []) {
    // Answering is the caller speaking: the broker matches the reply against the open question.
    const b = button(option, "answer", () => page.client.say(option).catch((err) => note(`answer failed: ${err.message}`)));
    b.dataset.option = option;
    buttons.append(b);
  }
  buttons.append(button("Resolve without asking", "resolve", async () => {
    const ack = await page.client.updateInteraction(handle ? { handle } : { callId }, ia.id, "resolved").catch((err) => ({ result: err.message }));
    closeDecision(ia.id, `resolved by the host: ${ack.result}`);
  }, "secondary"));
  li.append(buttons);
  decisions.set(ia.id, { callId, li });
  $("decisions").prepend(li);
  $("decisions-empty").hidden = true;
}

function closeDecision(id, text) {
  const d = decisions.get(id);
  if (!d || d.li.dataset.closed) return;
  d.li.dataset.closed = "true";
  d.li.querySelector(".buttons")?.remove();
  d.li.append(el("p", "job-meta", text));
}

// ---- conversation, timeline, frames ----

const partials = new Map(); // response id → li of a partial agent transcript

function showTranscript(f) {
  let li = f.response_id ? partials.get(f.response_id) : undefined;
  if (!li) {
    li = el("li", f.role);
    $("transcript").append(li);
    if (f.response_id) partials.set(f.response_id, li);
  }
  li.className = `${f.role}${f.final ? "" : " partial"}`;
  li.replaceChildren(el("span", "who", f.role === "agent" ? "Agent" : "Caller"), document.createTextNode(f.text));
  if (f.final && f.response_id) partials.delete(f.response_id);
  li.scrollIntoView({ block: "nearest" });
}

async function followTimeline(client) {
  timelineAbort?.abort();
  const ac = new AbortController();
  timelineAbort = ac;
  const url = `/v1/sessions/${encodeURIComponent(client.sessionId)}/timeline?follow=1`;
  let seen = 0;
  while (!ac.signal.aborted) {
    try {
      const resp = await fetch(url, { headers: { Authorization: `Bearer ${client.joinToken}` }, signal: ac.signal });
      if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      let n = 0;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, i).trim();
          buf = buf.slice(i + 1);
          // A re-opened stream starts from the beginning: skip what is shown already.
          if (line && ++n > seen) {
            seen = n;
            addTimeline(JSON.parse(line));
          }
        }
      }
    } catch (err) {
      if (ac.signal.aborted) return;
      note(`timeline: ${err.message}`);
    }
    if (client.state === "ended" || client.state === "closed") return;
    await sleep(1000, ac.signal);
  }
}

function addTimeline(entry) {
  page.timeline.push(entry);
  const li = el("li");
  const t = new Date(entry.at_ms).toLocaleTimeString();
  li.append(el("span", "", `${t} `), el("span", "kind", entry.kind), document.createTextNode(
    ` ${entry.handle ?? entry.call_id ?? ""} ${JSON.stringify(entry.detail ?? {})}`));
  $("timeline").append(li);
  li.scrollIntoView({ block: "nearest" });
}

const barriers = new Set(); // ids of the SDK's barriers (job.cancel of BARRIER_CALL_ID)

function logFrame(dir, frame) {
  page.frames.push({ dir, frame });
  // The SDK confirms frames the broker answers only on failure with a barrier: shown dimmed.
  let barrier = false;
  if (dir === "out" && frame.type === "job.cancel" && frame.call_id === BARRIER_CALL_ID) {
    barriers.add(frame.id);
    barrier = true;
  } else if (dir === "in" && frame.ref && barriers.delete(frame.ref)) {
    barrier = true;
  }
  const text = `${dir === "in" ? "←" : "→"} ${frame.seq ?? ""} ${frame.type} ${JSON.stringify(frame, (k, v) => (k === "type" || k === "seq" ? undefined : v))}`;
  const li = el("li", `${dir}${barrier ? " barrier" : ""}`, barrier ? `${text}  (SDK barrier)` : text);
  const list = $("frames");
  list.append(li);
  while (list.childElementCount > 400) list.firstElementChild.remove();
  li.scrollIntoView({ block: "nearest" });
}

// ---- small helpers ----

function setStatus(state, text) {
  const s = $("status");
  s.dataset.state = state;
  s.textContent = text;
}

/** Adds a note to a job (or, without one, to the status line). */
function note(text, j) {
  if (j) {
    j.notes.push(text);
    renderJob(j.call.callId);
  } else {
    $("status").textContent = text;
  }
}

function el(tag, className = "", text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

function button(label, action, onClick, variant) {
  const b = el("button", variant ?? "", label);
  b.type = "button";
  b.dataset.action = action;
  b.addEventListener("click", onClick);
  return b;
}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(t);
      resolve();
    }, { once: true });
  });
}

function randomHex(n) {
  const b = new Uint8Array(Math.ceil(n / 2));
  crypto.getRandomValues(b);
  return [...b].map((x) => x.toString(16).padStart(2, "0")).join("").slice(0, n);
}

function summarize(v) {
  if (v instanceof Error) return { error: v.message };
  if (v && typeof v === "object" && "error" in v) return { ...v, error: v.error?.message };
  if (v && typeof v === "object" && "calls" in v) return { ...v, calls: v.calls.map((c) => c.callId) };
  return v;
}
