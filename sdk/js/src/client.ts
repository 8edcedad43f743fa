// The Client: one connection to a Backchannel session, as its caller (and host) or as a host,
// over WebRTC or WebSocket, that survives drops by resuming its slot.

import { ChunkPlayer, MicEncoder } from "./audio.js";
import {
  callerTextFrame, helloFrame, injectFrame, jobCancelFrame, sessionEndFrame, toolDeferredFrame, toolErrorFrame,
  toolInteractionUpdateFrame, toolPartialResultFrame, toolProgressFrame, toolResultFrame, toolsDeclareFrame,
  type DeferOptions, type InjectOptions, type PartialResultOptions,
} from "./build.js";
import { Emitter, type Unsubscribe } from "./emitter.js";
import {
  BackchannelError, BrokerError, ClosedError, DeferRejectedError, SessionEndedError, UnconfirmedError,
} from "./errors.js";
import {
  SERVER_FRAME_TYPES, checkClientFrame, decodeServerFrame, encodeClientFrame, jobTarget,
  type ClientFrame, type EndReason, type ErrorFrame, type Interaction, type InteractionState, type JSONValue,
  type JobCancelResultFrame, type JobRef, type JobState, type ResumedJob, type ServerFrame, type ServerFrameMap,
  type ServerFrameType, type ToolCallFrame, type ToolDecl, type ToolDeferredAckFrame, type ToolInteractionAnswerFrame,
  type ToolInteractionUpdateAckFrame, type ToolsDeclaredFrame, type UnknownServerFrame, type WelcomeFrame,
} from "./frames.js";
import {
  HTTPError, WebRTCTransportFactory, WebSocketTransportFactory, httpError,
  type Transport, type TransportFactory, type WebRTCOptions,
} from "./transport.js";

/** How a client reconnects after a drop: exponential backoff with jitter (SPEC 15). */
export interface ReconnectOptions {
  /** The wait before the second attempt (the first is immediate); default 250 ms. */
  initialDelayMs?: number;
  /** The longest wait between attempts; default 5000 ms. */
  maxDelayMs?: number;
  /** How much each wait grows; default 2. */
  multiplier?: number;
  /** Each wait is randomized by ± this fraction; default 0.5. */
  jitter?: number;
  /** Give up after this long; default the resume window the broker announced in its welcome. */
  maxElapsedMs?: number;
}

/** What resuming a slot takes (SPEC 10): see Client.resumeState. */
export interface ResumeState {
  sessionId: string;
  /** The bearer of the WebRTC signaling: the session's join token, or its caller token. */
  joinToken?: string;
  callerToken?: string;
  resumeToken: string;
  lastSeq: number;
}

/** The options of connect. */
export interface ConnectOptions {
  /** The broker's base URL (http(s)://host:port); default the page's origin. */
  url?: string;
  /** An API key: alone it creates a session; with sessionId it attaches to one of its tenant. */
  apiKey?: string;
  /** The session's join token (with sessionId): the backend's token, which attaches any role. */
  joinToken?: string;
  /**
   * The session's caller token (with sessionId): the end user's token, which POST /v1/sessions'
   * caller_url carries. It attaches a caller only (which may still serve tools no other
   * connection of the session declares) and reaches no HTTP resource but the WebRTC signaling.
   */
  callerToken?: string;
  /** The session to attach to. */
  sessionId?: string;
  /** "webrtc" (default: audio over RTP, frames on the data channel) or "websocket" (/v1/ws). */
  transport?: "webrtc" | "websocket";
  /** The connection's role: "caller" (default; it may also serve tools) or "host". */
  role?: "caller" | "host";
  /** The caller's microphone: a stream or track of the application's, or true to ask for one (getUserMedia). */
  microphone?: MediaStream | MediaStreamTrack | boolean;
  /**
   * Resume a slot instead of attaching: a resumeState() kept by an earlier client (a page
   * reload). The broker replays the frames after its lastSeq; the "resumed" event lists the
   * open deferred jobs, with a ToolCall each to finish them.
   */
  resume?: ResumeState;
  /** Tools declared in the hello (declareTools before connect adds to these; not with resume). */
  tools?: ToolDecl[];
  /** Where the agent's audio plays (WebRTC); default a new Audio element; null: not played. */
  audioElement?: HTMLAudioElement | null;
  /** Play the agent's audio over WebSocket with Web Audio (default true). */
  playAudio?: boolean;
  /** The body of POST /v1/sessions when the client creates the session for WebRTC. */
  session?: { model?: { kind: string; instructions?: string; voice?: string }; metadata?: Record<string, JSONValue> };
  /** Reconnect policy, or false to stop at the first drop. */
  reconnect?: ReconnectOptions | false;
  /** WebRTC settings. */
  webrtc?: WebRTCOptions;
  /** How long the broker may take to answer hello with welcome (default 10000 ms). */
  connectTimeoutMs?: number;
  /** Opens the transports instead of the built-in ones (tests). */
  transportFactory?: TransportFactory;
}

/** The life of a client. */
export type ClientState = "idle" | "connecting" | "open" | "reconnecting" | "closed" | "ended";

/** What the client knows about a job it serves. */
export interface JobInfo {
  callId: string;
  name: string;
  arguments: JSONValue;
  /** The job's state as far as this client knows. */
  state: JobState;
  handle?: string;
  statusLabel?: string;
  /** When a deferred job times out, epoch ms. */
  deadlineMs?: number;
  /** The open interaction, as asked by this client or listed by tool_deferred_resume. */
  openInteraction?: Interaction;
}

/** The events of a Client: one per broker frame type, plus the connection's own. */
export type ClientEvents = { [K in ServerFrameType]: ServerFrameMap[K] } & {
  /**
   * Every frame the broker sends, known or not, after the client acted on it — the answers to
   * the client's barriers too (job.cancel_result for BARRIER_CALL_ID), which have no event of
   * their type.
   */
  frame: ServerFrame | UnknownServerFrame;
  /** Every frame the client sends, its barriers (job.cancel of BARRIER_CALL_ID) included. */
  sent: ClientFrame;
  /** The first welcome. */
  connected: WelcomeFrame;
  /** The transport dropped; the client reconnects. */
  dropped: { reason: string };
  /** A reconnect attempt is about to be made after delayMs. */
  reconnecting: { attempt: number; delayMs: number };
  /** The slot was resumed: every frame after last_seq was replayed, and these deferred jobs are open. */
  resumed: { jobs: ResumedJob[]; calls: ToolCall[]; lastSeq: number };
  /** The client stopped: closed, gave up reconnecting, refused, or the session ended. */
  closed: { error?: Error };
  /** The state changed. */
  state: ClientState;
  /** The agent's audio track arrived (WebRTC). */
  track: MediaStream;
  /** A chunk of agent audio arrived (WebSocket; µ-law, 8 kHz, 20 ms). */
  audio: Uint8Array;
  /** Something the application may want to know but need not act on. */
  warning: { message: string };
};

type ReqKind = "answered" | "silent" | "barrier" | "sync" | "end";
type ResendRule = "never" | "always" | "result";

interface Req {
  id: string;
  frame: ClientFrame;
  text: string;
  kind: ReqKind;
  rule: ResendRule;
  onAnswer?: (f: ServerFrame) => unknown;
  resolve(v: unknown): void;
  reject(e: Error): void;
  covers?: Req[];
  written: boolean;
  gen: number;
  order: number;
  resent: boolean;
  done: boolean;
}

/**
 * The call id of the client's barriers. A barrier is job.cancel of a call that cannot exist (0
 * is not in the alphabet of broker call ids): always answered (job.cancel_result unknown_call),
 * with no other effect. The broker applies one connection's frames in order, so when a
 * barrier's answer arrives, every frame sent before it that got no error was applied. The
 * client sends one after each batch of frames that the broker answers only when they fail
 * (progress, partial results, results, injects, caller text), and one first after a resume.
 */
export const BARRIER_CALL_ID = "call_00000000000000000000";
/** The broker's default frame limit (SPEC 2), in bytes of UTF-8. */
const MAX_FRAME_BYTES = 1 << 20;
const utf8 = new TextEncoder();

/** The UTF-8 size of a frame's text when it is over MAX_FRAME_BYTES, else 0. */
function overFrameLimit(text: string): number {
  // A UTF-16 code unit is at most 3 bytes of UTF-8: only a long text needs encoding.
  if (text.length * 3 <= MAX_FRAME_BYTES) return 0;
  const n = utf8.encode(text).length;
  return n > MAX_FRAME_BYTES ? n : 0;
}
// Client-side pacing keeps the client under the broker's rate limit (SPEC 2: 100 frames/s, burst 200).
const PACE_RATE = 80;
const PACE_BURST = 100;

/** Errors that retrying the same hello cannot fix. */
function permanent(e: unknown): boolean {
  if (e instanceof BrokerError) return e.code !== "internal" && e.code !== "limit_exceeded";
  if (e instanceof HTTPError) return e.status === 401 || e.status === 403 || e.status === 404 || e.status === 410;
  return e instanceof ClosedError || e instanceof SessionEndedError;
}

function randomString(n: number): string {
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  const bytes = new Uint8Array(n);
  crypto.getRandomValues(bytes);
  let s = "";
  for (const b of bytes) s += alphabet[b % alphabet.length];
  return s;
}

function normalizeBase(url: string | undefined): string {
  const raw = url ?? (globalThis as { location?: Location }).location?.origin;
  if (!raw) throw new TypeError("backchannel: set ConnectOptions.url to the broker's http(s)://host:port");
  const u = new URL(raw);
  if (u.protocol === "ws:") u.protocol = "http:";
  else if (u.protocol === "wss:") u.protocol = "https:";
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new TypeError(`backchannel: ConnectOptions.url ${JSON.stringify(raw)} must start with http://, https://, ws:// or wss://`);
  }
  if (u.pathname.endsWith("/v1/ws")) u.pathname = u.pathname.slice(0, -"/v1/ws".length);
  return (u.origin + u.pathname).replace(/\/+$/, "");
}

/**
 * A call of one of the client's tools (tool_call, SPEC 5), with the methods that answer it. Until
 * it is deferred it is addressed by its call id; after defer, by its handle.
 */
export class ToolCall {
  /** The broker's id of the call. */
  readonly callId: string;
  /** The tool called. */
  readonly name: string;
  /** The call's arguments, already checked against the tool's parameters. */
  readonly arguments: JSONValue;
  /** The tool_call frame (undefined for a job that reached this client through tool_deferred_resume). */
  readonly frame?: ToolCallFrame;
  /** Aborted when the broker cancels the job (tool_cancel); its reason is the cancel reason. */
  readonly signal: AbortSignal;
  private readonly abort = new AbortController();

  /** @internal */
  constructor(private readonly client: Client, callId: string, name: string, args: JSONValue, frame?: ToolCallFrame) {
    this.callId = callId;
    this.name = name;
    this.arguments = args;
    this.frame = frame;
    this.signal = this.abort.signal;
  }

  /** The handle once deferred. */
  get handle(): string | undefined {
    return this.client.jobs.get(this.callId)?.handle;
  }

  /** How frames name the job: the handle once deferred, else the call id. */
  get ref(): JobRef {
    const h = this.handle;
    return h ? { handle: h } : { callId: this.callId };
  }

  /** The job's state as far as the client knows. */
  get state(): JobState {
    return this.client.jobs.get(this.callId)?.state ?? "pending";
  }

  /** Defers the call under handle (tool_deferred, SPEC 6); rejects with DeferRejectedError. */
  defer(handle: string, statusLabel?: string): Promise<ToolDeferredAckFrame> {
    return this.client.sendToolDeferred(this.callId, { handle, statusLabel });
  }

  /** Sends a progress note (tool_progress): context only, never spoken. */
  progress(note: string): Promise<void> {
    return this.client.sendProgress(this.ref, note);
  }

  /** Sends a milestone: a partial result the broker narrates when the floor is free. */
  milestone(segment: JSONValue, phase?: string): Promise<void> {
    return this.client.sendPartialResult(this.ref, segment, { reply: true, phase }).then(() => undefined);
  }

  /** Puts a decision to the caller and resolves to the interaction's id. */
  ask(interaction: Interaction, segment?: JSONValue): Promise<string> {
    return this.client.ask(this.ref, interaction, segment);
  }

  /**
   * Resolves with the next answer to an interaction of this job (tool_interaction_answer): to
   * interactionId, or to any of its interactions. Rejects when the job is cancelled or the
   * client stops.
   */
  answer(interactionId?: string): Promise<ToolInteractionAnswerFrame> {
    return new Promise((resolve, reject) => {
      const cleanup = () => {
        offAnswer();
        offClosed();
        this.signal.removeEventListener("abort", onAbort);
      };
      const offAnswer = this.client.on("tool_interaction_answer", (f) => {
        if (f.call_id !== this.callId || (interactionId && f.interaction_id !== interactionId)) return;
        cleanup();
        resolve(f);
      });
      const offClosed = this.client.on("closed", ({ error }) => {
        cleanup();
        reject(error ?? new ClosedError("backchannel: the client closed"));
      });
      const onAbort = () => {
        cleanup();
        reject(new BackchannelError(`backchannel: job ${this.handle ?? this.callId} was cancelled (${String(this.signal.reason)})`));
      };
      if (this.signal.aborted) onAbort();
      else this.signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** Closes an open interaction (tool_interaction_update). */
  updateInteraction(interactionId: string, state: InteractionState): Promise<ToolInteractionUpdateAckFrame> {
    return this.client.updateInteraction(this.ref, interactionId, state);
  }

  /** Completes the job with output. */
  result(output: JSONValue): Promise<void> {
    return this.client.sendResult(this.ref, output);
  }

  /** Completes the job as failed. */
  fail(message: string): Promise<void> {
    return this.client.sendError(this.ref, message);
  }

  /** @internal */
  cancelled(reason: string): void {
    this.abort.abort(reason);
  }
}

/**
 * A connection to one Backchannel session: the caller (audio, caller.text) and, with tools, a
 * host that runs calls and defers slow ones as background jobs.
 *
 * Register listeners (on, onToolCall) and tools (declareTools), then connect. Every broker frame
 * is an event of its own type (on("tool_job_narration", fn)) and of "frame". Requests return
 * promises that settle once the broker applied the frame — or reject with a BrokerError (its
 * code), a DeferRejectedError, a SessionEndedError, a ClosedError or an UnconfirmedError.
 *
 * A dropped transport is not the end: the client reconnects with exponential backoff and
 * jitter, resumes its slot with the latest resume token and last_seq, drops replayed frames it
 * has seen (by seq), resends what the broker never applied, and reports the open deferred jobs
 * from tool_deferred_resume with the "resumed" event.
 */
export class Client extends Emitter<ClientEvents> {
  /** The client's state. */
  state: ClientState = "idle";
  /** The session, once known. */
  sessionId = "";
  /** The session's join token, once known (given, or from the session the client created). */
  joinToken = "";
  /** The session's caller token, when given (or from the session the client created). */
  callerToken = "";
  /** The latest resume token of the slot. */
  resumeToken = "";
  /** The seq of the last broker frame handled. */
  lastSeq = 0;
  /** How long the broker keeps a dropped slot (from welcome). */
  resumeWindowMs = 120000;
  /** The jobs of the calls this client served, by call id. */
  readonly jobs = new Map<string, JobInfo>();

  private opts: ConnectOptions = {};
  private base = "";
  private factory: TransportFactory | null = null;
  private tools: ToolDecl[] = [];
  private handlers = new Set<(call: ToolCall) => unknown>();
  private calls = new Map<string, ToolCall>();
  private transport: Transport | null = null;
  private gen = 0;
  private opening: AbortController | null = null;
  private handshake: ((f: ServerFrame | UnknownServerFrame | Error) => void) | null = null;
  private queue: Req[] = [];
  private pending = new Map<string, Req>();
  private syncing = false;
  private flushScheduled = false;
  private flushTimer: ReturnType<typeof setTimeout> | undefined;
  private tokens = PACE_BURST;
  private lastRefill = Date.now();
  private idPrefix = "js" + randomString(6) + "-";
  private nextId = 0;
  private order = 0;
  private endReason: EndReason | null = null;
  private resumedJobs: ResumedJob[] | null = null;
  private cancelledJobs = new Set<string>();
  private mic: MediaStreamTrack | null = null;
  private ownMic = false;
  private micEncoder: MicEncoder | null = null;
  private player: ChunkPlayer | null = null;
  private audioEl: HTMLAudioElement | null = null;
  private stream: MediaStream | null = null;
  private wakeReconnect: (() => void) | null = null;
  private resource: string | undefined;
  private helloId = "";

  /** The current peer connection (WebRTC), e.g. for getStats. */
  get peerConnection(): RTCPeerConnection | undefined {
    return this.transport?.peerConnection;
  }

  /** The agent's audio (WebRTC), once its track arrived. */
  get remoteStream(): MediaStream | null {
    return this.stream;
  }

  /** The microphone track the client sends, if any. */
  get microphone(): MediaStreamTrack | null {
    return this.mic;
  }

  /**
   * Declares the client's tools (tools.declare, SPEC 4), replacing its tool set. Before
   * connect they go into the hello and the promise resolves with the names once the broker
   * confirmed them.
   */
  declareTools(tools: ToolDecl[]): Promise<string[]> {
    if (this.state === "idle" || this.state === "connecting") {
      this.tools = [...tools];
      if (tools.length === 0) return Promise.resolve([]); // a hello without tools is not answered with tools.declared
      return new Promise((resolve, reject) => {
        const offAll = () => {
          offOk();
          offRefused();
          offClosed();
        };
        const offOk = this.on("tools.declared", (f) => {
          offAll();
          resolve(f.names);
        });
        // The hello's tools were refused (bad_frame naming the tool, or limit_exceeded).
        const offRefused = this.on("error", (f) => {
          if (!f.ref || f.ref !== this.helloId) return;
          offAll();
          reject(new BrokerError("tools in hello", f));
        });
        const offClosed = this.on("closed", ({ error }) => {
          offAll();
          reject(error ?? new ClosedError("backchannel: closed before the tools were declared"));
        });
      });
    }
    this.tools = [...tools];
    return this.request<ToolsDeclaredFrame>(toolsDeclareFrame(tools), "answered", "always").then((f) => f.names);
  }

  /**
   * Runs handler for every tool_call. When it returns (or resolves to) a value other than
   * undefined, the client sends it as the result; when it throws, the message as the error;
   * when it returns undefined, the handler answers itself (call.defer, call.result, …).
   */
  onToolCall(handler: (call: ToolCall) => unknown): Unsubscribe {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  /** Connects (see ConnectOptions) and resolves with the welcome. */
  async connect(opts: ConnectOptions): Promise<WelcomeFrame> {
    if (this.state !== "idle") throw new BackchannelError(`backchannel: connect on a client that is ${this.state}`);
    this.opts = opts;
    this.base = normalizeBase(opts.url);
    if (opts.joinToken && !opts.sessionId) throw new TypeError("backchannel: joinToken needs sessionId, the session it belongs to");
    if (opts.callerToken && !opts.sessionId) throw new TypeError("backchannel: callerToken needs sessionId, the session it belongs to");
    if (opts.callerToken && !opts.joinToken && (opts.role ?? "caller") !== "caller") {
      throw new TypeError("backchannel: a callerToken attaches a caller only (role \"caller\")");
    }
    if (opts.resume && (!opts.resume.sessionId || !opts.resume.resumeToken)) {
      throw new TypeError("backchannel: resume needs the sessionId and resumeToken of resumeState()");
    }
    if (!opts.apiKey && !opts.joinToken && !opts.callerToken && !opts.resume) {
      throw new TypeError("backchannel: set apiKey (to create or attach to a session), or sessionId with joinToken or callerToken");
    }
    this.sessionId = opts.resume?.sessionId ?? opts.sessionId ?? "";
    this.joinToken = opts.resume?.joinToken ?? opts.joinToken ?? "";
    this.callerToken = opts.resume?.callerToken ?? opts.callerToken ?? "";
    if (opts.resume) {
      this.resumeToken = opts.resume.resumeToken;
      this.lastSeq = opts.resume.lastSeq;
    }
    // Tools of the options first, then those declared before connect.
    if (opts.tools) this.tools = [...opts.tools, ...this.tools];
    const kind = opts.transport ?? "webrtc";
    this.factory = opts.transportFactory ??
      (kind === "websocket" ? new WebSocketTransportFactory() : new WebRTCTransportFactory(opts.webrtc));
    this.setState("connecting");
    try {
      await this.acquireMicrophone(opts.microphone);
      if (kind === "webrtc" && !this.sessionId) await this.createSession();
      const w = await this.open(!!opts.resume);
      this.emit("connected", w);
      return w;
    } catch (e) {
      this.shutdown("closed", e as Error);
      throw e;
    }
  }

  /** Defers a pending call under a handle (tool_deferred, SPEC 6); rejects with DeferRejectedError when the broker refuses. */
  sendToolDeferred(callId: string, o: DeferOptions): Promise<ToolDeferredAckFrame> {
    return this.request<ToolDeferredAckFrame>(toolDeferredFrame(callId, o), "answered", "always", (f) => {
      const ack = f as ToolDeferredAckFrame;
      if (f.type !== "tool_deferred_ack") throw new BackchannelError(`backchannel: tool_deferred answered with ${f.type}`);
      if (!ack.accepted) throw new DeferRejectedError(ack);
      const j = this.jobs.get(callId);
      if (j) {
        j.state = "deferred";
        j.handle = ack.handle;
        j.statusLabel = o.statusLabel;
        j.deadlineMs = ack.deadline_ms;
      }
      return ack;
    });
  }

  /** Sends a progress note (tool_progress, SPEC 7): added to the agent's context, never spoken. */
  sendProgress(ref: JobRef, note: string): Promise<void> {
    return this.request<void>(toolProgressFrame(ref, note), "silent", "always");
  }

  /**
   * Sends a partial result (tool_partial_result, SPEC 7, 9): with reply the broker narrates it
   * as a milestone; with interaction it asks the caller (an id "ia_…" is assigned when it has
   * none). Resolves with the interaction's id, if any.
   */
  sendPartialResult(ref: JobRef, segment: JSONValue, o: PartialResultOptions = {}): Promise<{ interactionId?: string }> {
    let interaction = o.interaction;
    if (interaction && !interaction.id) interaction = { ...interaction, id: "ia_" + randomString(20) };
    const f = toolPartialResultFrame(ref, segment, { ...o, interaction });
    // A repeated milestone would be narrated twice, a repeated ask asked again.
    const rule: ResendRule = o.reply || interaction ? "never" : "always";
    return this.request<void>(f, "silent", rule).then(() => {
      if (interaction) {
        const j = this.jobOf(ref);
        if (j) j.openInteraction = interaction;
      }
      return { interactionId: interaction?.id };
    });
  }

  /** Puts a decision to the caller (a partial result with an interaction) and resolves to its id. */
  ask(ref: JobRef, interaction: Interaction, segment?: JSONValue): Promise<string> {
    return this.sendPartialResult(ref, segment ?? interaction.prompt, { interaction }).then((r) => r.interactionId!);
  }

  /** Closes an open interaction of a job (tool_interaction_update, SPEC 9): resolved, cancelled or superseded. */
  updateInteraction(ref: JobRef, interactionId: string, state: InteractionState): Promise<ToolInteractionUpdateAckFrame> {
    return this.request<ToolInteractionUpdateAckFrame>(toolInteractionUpdateFrame(ref, interactionId, state), "answered", "never", (f) => {
      if (f.type !== "tool_interaction_update_ack") throw new BackchannelError(`backchannel: tool_interaction_update answered with ${f.type}`);
      const j = this.jobOf(ref);
      if (j?.openInteraction?.id === interactionId) j.openInteraction = undefined;
      return f;
    });
  }

  /** Completes a job with output (tool_result, SPEC 5); undefined is sent as "". */
  sendResult(ref: JobRef, output: JSONValue | undefined): Promise<void> {
    return this.finish(ref, toolResultFrame(ref, output), "completed");
  }

  /** Completes a job as failed with message (tool_result with error, SPEC 5). */
  sendError(ref: JobRef, message: string): Promise<void> {
    return this.finish(ref, toolErrorFrame(ref, message), "failed");
  }

  /** Asks the agent to take a turn about text at the next free floor (inject, SPEC 8). */
  inject(text: string, o: InjectOptions = {}): Promise<void> {
    return this.request<void>(injectFrame(text, o), "silent", "never");
  }

  /** Asks the broker to cancel a job of the session (job.cancel, SPEC 11). */
  cancelJob(ref: JobRef): Promise<JobCancelResultFrame> {
    return this.request<JobCancelResultFrame>(jobCancelFrame(ref), "answered", "always");
  }

  /** Says text as the caller (caller.text, SPEC 17): a caller turn, like a final transcript of speech. */
  say(text: string): Promise<void> {
    return this.request<void>(callerTextFrame(text), "silent", "never");
  }

  /** Ends the session (session.end) and resolves once session.ended arrived. */
  end(): Promise<void> {
    if (this.state === "ended") return Promise.resolve();
    return this.request<void>(sessionEndFrame(), "end", "always");
  }

  /**
   * Hangs up: DELETE of the WebRTC resource (SPEC 3.6), which ends the session with reason
   * hung_up. Over WebSocket, which has no such resource, it is end().
   */
  async hangUp(): Promise<void> {
    if (this.state === "ended") return;
    const resource = this.resource;
    if (!resource) return this.end();
    let timer: ReturnType<typeof setTimeout> | undefined;
    let off: Unsubscribe = () => {};
    const ended = new Promise<void>((resolve) => {
      off = this.on("closed", () => resolve());
      timer = setTimeout(resolve, 2000);
    });
    try {
      const resp = await fetch(resource, { method: "DELETE", headers: { Authorization: `Bearer ${this.bearer()}` } });
      if (!resp.ok) throw await httpError("hang-up", resp);
      // The broker queued session.ended before it answered: wait for it briefly.
      if (!this.isStopped()) await ended;
    } finally {
      clearTimeout(timer);
      off();
    }
    if (!this.isStopped()) this.onSessionEnded("hung_up");
  }

  private isStopped(): boolean {
    return this.state === "closed" || this.state === "ended";
  }

  /** Closes the connection without ending the session: the slot stays resumable for the resume window. */
  close(): void {
    if (this.state === "closed" || this.state === "ended") return;
    this.shutdown("closed", undefined);
  }

  /**
   * What resuming this client's slot from another client takes — after a page reload, say:
   * keep it (sessionStorage) and pass it as ConnectOptions.resume. It changes with every
   * welcome (the resume token rotates) and every frame (lastSeq); it holds secrets.
   */
  resumeState(): ResumeState {
    const st: ResumeState = { sessionId: this.sessionId, joinToken: this.joinToken, resumeToken: this.resumeToken, lastSeq: this.lastSeq };
    if (this.callerToken) st.callerToken = this.callerToken;
    return st;
  }

  /** The statistics of the peer connection (WebRTC). */
  async getStats(): Promise<RTCStatsReport | undefined> {
    return this.peerConnection?.getStats();
  }

  /** Mutes or unmutes the microphone. */
  setMicrophoneEnabled(enabled: boolean): void {
    if (this.mic) this.mic.enabled = enabled;
  }

  /** The job a reference names, if this client knows it. */
  private jobOf(ref: JobRef): JobInfo | undefined {
    const t = jobTarget(ref);
    if (t.call_id) return this.jobs.get(t.call_id);
    for (const j of this.jobs.values()) if (j.handle === t.handle) return j;
    return undefined;
  }

  private finish(ref: JobRef, frame: ClientFrame, state: JobState): Promise<void> {
    return this.request<void>(frame, "silent", "result").then(() => {
      const j = this.jobOf(ref);
      if (j) {
        j.state = state;
        j.openInteraction = undefined;
      }
    });
  }

  private bearer(): string {
    return this.joinToken || this.callerToken || this.opts.apiKey || "";
  }

  private setState(s: ClientState): void {
    if (this.state === s) return;
    this.state = s;
    this.emit("state", s);
  }

  private async acquireMicrophone(m: ConnectOptions["microphone"]): Promise<void> {
    if (!m) return;
    if (m === true) {
      const s = await navigator.mediaDevices.getUserMedia({ audio: true });
      this.mic = s.getAudioTracks()[0] ?? null;
      this.ownMic = true;
    } else if (typeof MediaStreamTrack !== "undefined" && m instanceof MediaStreamTrack) {
      this.mic = m;
    } else {
      this.mic = (m as MediaStream).getAudioTracks()[0] ?? null;
    }
  }

  /** POST /v1/sessions with the API key: WebRTC signaling needs the session first. */
  private async createSession(): Promise<void> {
    const resp = await fetch(`${this.base}/v1/sessions`, {
      method: "POST",
      headers: { Authorization: `Bearer ${this.opts.apiKey}`, "Content-Type": "application/json" },
      body: JSON.stringify(this.opts.session ?? {}),
    });
    if (resp.status !== 201) throw await httpError("creating a session", resp);
    const body = (await resp.json()) as { session_id: string; join_token: string; caller_token?: string; resume_window_ms?: number };
    this.sessionId = body.session_id;
    this.joinToken = body.join_token;
    this.callerToken = body.caller_token ?? "";
    if (body.resume_window_ms) this.resumeWindowMs = body.resume_window_ms;
  }

  /** Opens a transport and says hello (a resume when resume), resolving with the welcome. */
  private async open(resume: boolean): Promise<WelcomeFrame> {
    const gen = ++this.gen;
    const ac = new AbortController();
    this.opening = ac;
    const tr = await this.factory!.open(
      { baseURL: this.base, sessionId: this.sessionId, bearer: this.bearer(), microphone: this.mic, signal: ac.signal },
      {
        message: (text) => this.onMessage(gen, text),
        audio: (chunk) => {
          if (gen === this.gen) this.onAudio(chunk);
        },
        track: (stream) => {
          if (gen === this.gen) this.onTrack(stream);
        },
        closed: (reason) => this.onClosed(gen, reason),
      },
    );
    if (gen !== this.gen || ac.signal.aborted) {
      tr.close();
      throw new ClosedError("backchannel: closed while connecting");
    }
    this.transport = tr;
    if (tr.resource) this.resource = tr.resource;
    const timeout = this.opts.connectTimeoutMs ?? 10000;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const welcome = new Promise<WelcomeFrame>((resolve, reject) => {
      this.handshake = (f) => {
        this.handshake = null;
        clearTimeout(timer);
        if (f instanceof Error) {
          reject(f);
        } else if (f.type === "welcome") {
          // Taken at once, before the frames after it: a resume's replay follows in the same breath.
          this.welcomed(tr, f as WelcomeFrame, resume);
          resolve(f as WelcomeFrame);
        } else if (f.type === "error") {
          reject(new BrokerError("hello refused", f as ErrorFrame));
        } else {
          reject(new BackchannelError(`backchannel: the broker answered hello with ${f.type} instead of welcome`));
        }
      };
      timer = setTimeout(() => this.handshake?.(new BackchannelError(`backchannel: no welcome within ${timeout} ms`)), timeout);
    });
    this.helloId = this.newId();
    const hello = helloFrame(resume
      ? { id: this.helloId, role: this.opts.role ?? "caller", sessionId: this.sessionId, resumeToken: this.resumeToken, lastSeq: this.lastSeq }
      : {
        id: this.helloId, role: this.opts.role ?? "caller", sessionId: this.sessionId || undefined,
        apiKey: this.joinToken || this.callerToken ? undefined : this.opts.apiKey, joinToken: this.joinToken || undefined,
        callerToken: this.joinToken ? undefined : this.callerToken || undefined, tools: this.tools,
      });
    this.emit("sent", hello);
    tr.send(encodeClientFrame(hello));
    try {
      return await welcome;
    } catch (e) {
      if (this.transport === tr) this.transport = null;
      tr.close();
      throw e;
    }
  }

  /** Takes the welcome of a new transport: the slot's new resume token, then the writer (after a resume's sync barrier). */
  private welcomed(tr: Transport, w: WelcomeFrame, resume: boolean): void {
    this.opening = null;
    this.sessionId = w.session_id;
    this.resumeToken = w.resume_token;
    if (w.join_token) this.joinToken = w.join_token;
    if (w.resume_window_ms > 0) this.resumeWindowMs = w.resume_window_ms;
    this.emit("frame", w);
    this.emit("welcome", w);
    this.setState("open");
    if (tr.kind === "websocket" && this.mic && !this.micEncoder && typeof AudioContext !== "undefined") {
      this.micEncoder = new MicEncoder(this.mic, (chunk) => this.transport?.sendAudio?.(chunk));
      this.micEncoder.start().catch((e) => this.emit("warning", { message: `microphone: ${(e as Error).message}` }));
    }
    if (resume) {
      // Nothing else goes out until the sync barrier is answered: by then the broker has replayed
      // everything after last_seq, so an unanswered request of the old connection was never applied.
      this.syncing = true;
      const sync = this.makeReq(jobCancelFrame({ callId: BARRIER_CALL_ID }), "sync", "never");
      this.write(sync);
    } else {
      this.scheduleFlush();
    }
  }

  private newId(): string {
    return this.idPrefix + ++this.nextId;
  }

  private makeReq(frame: ClientFrame, kind: ReqKind, rule: ResendRule, onAnswer?: (f: ServerFrame) => unknown): Req {
    frame.id = this.newId();
    const r: Req = {
      id: frame.id, frame, text: encodeClientFrame(frame), kind, rule, onAnswer,
      resolve: () => {}, reject: () => {}, written: false, gen: 0, order: 0, resent: false, done: false,
    };
    return r;
  }

  private request<T>(frame: ClientFrame, kind: ReqKind, rule: ResendRule, onAnswer?: (f: ServerFrame) => unknown): Promise<T> {
    if (this.state === "ended") return Promise.reject(new SessionEndedError(this.endReason ?? "ended"));
    if (this.state === "closed" || this.state === "idle") {
      return Promise.reject(new ClosedError(`backchannel: the client is ${this.state === "idle" ? "not connected yet" : "closed"}`));
    }
    let r: Req;
    try {
      checkClientFrame(frame);
      r = this.makeReq(frame, kind, rule, onAnswer);
    } catch (e) {
      return Promise.reject(e);
    }
    const bytes = overFrameLimit(r.text);
    if (bytes > 0) {
      return Promise.reject(new BackchannelError(`backchannel: a ${frame.type} frame of ${bytes} bytes is over the broker's frame limit of ${MAX_FRAME_BYTES} bytes`));
    }
    return new Promise<T>((resolve, reject) => {
      r.resolve = resolve as (v: unknown) => void;
      r.reject = reject;
      this.queue.push(r);
      this.scheduleFlush();
    });
  }

  private settle(r: Req, value: unknown, err?: Error): void {
    if (r.done) return;
    r.done = true;
    this.pending.delete(r.id);
    if (err) r.reject(err);
    else r.resolve(value);
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    queueMicrotask(() => {
      this.flushScheduled = false;
      this.flush();
    });
  }

  /** Writes what is queued, paced, each batch of silent requests followed by a barrier. */
  private flush(): void {
    if (!this.transport || this.state !== "open" || this.syncing) return;
    const now = Date.now();
    this.tokens = Math.min(PACE_BURST, this.tokens + ((now - this.lastRefill) / 1000) * PACE_RATE);
    this.lastRefill = now;
    const silent: Req[] = [];
    while (this.queue.length > 0 && this.tokens >= 1) {
      const r = this.queue.shift()!;
      if (r.done) continue;
      this.tokens--;
      this.write(r);
      if (r.kind === "silent") silent.push(r);
    }
    if (silent.length > 0) {
      const b = this.makeReq(jobCancelFrame({ callId: BARRIER_CALL_ID }), "barrier", "never");
      b.covers = silent;
      this.tokens--;
      this.write(b);
    }
    if (this.queue.length > 0 && this.flushTimer === undefined) {
      this.flushTimer = setTimeout(() => {
        this.flushTimer = undefined;
        this.flush();
      }, Math.ceil(1000 / PACE_RATE));
    }
  }

  private write(r: Req): void {
    r.written = true;
    r.gen = this.gen;
    r.order = ++this.order;
    this.pending.set(r.id, r);
    this.emit("sent", r.frame);
    this.transport!.send(r.text);
  }

  private onMessage(gen: number, text: string): void {
    if (gen !== this.gen) return;
    let f: ServerFrame | UnknownServerFrame;
    try {
      f = decodeServerFrame(text);
    } catch (e) {
      // A frame this SDK cannot read: its seq still counts as seen, so a resume does not ask for it again.
      const m = /"seq"\s*:\s*(\d+)/.exec(text);
      if (m && Number(m[1]) > this.lastSeq) this.lastSeq = Number(m[1]);
      this.emit("warning", { message: `ignoring a frame the SDK cannot decode: ${(e as Error).message}` });
      return;
    }
    if (this.handshake) {
      this.handshake(f);
      return;
    }
    const seq = "seq" in f ? f.seq : undefined; // every broker frame but welcome has one
    if (typeof seq === "number" && seq > 0) {
      if (seq <= this.lastSeq) return; // replayed, and seen before
      if (this.lastSeq > 0 && seq !== this.lastSeq + 1) {
        this.emit("warning", { message: `seq gap: after ${this.lastSeq} came ${seq}` });
      }
      this.lastSeq = seq;
    }
    this.route(f);
  }

  private route(f: ServerFrame | UnknownServerFrame): void {
    const r = f.ref ? this.pending.get(f.ref) : undefined;
    if (r) {
      this.answer(r, f as ServerFrame);
      if (r.kind === "barrier" || r.kind === "sync") {
        this.emit("frame", f); // internal: no event of its type
        return;
      }
    }
    switch (f.type) {
      case "tool_call":
        this.onToolCallFrame(f as ToolCallFrame);
        break;
      case "tool_cancel": {
        const c = f as ServerFrameMap["tool_cancel"];
        this.cancelledJobs.add(c.call_id);
        const j = this.jobs.get(c.call_id);
        if (j) {
          j.state = c.reason === "timeout" ? "timed_out" : "cancelled";
          j.openInteraction = undefined;
        }
        this.calls.get(c.call_id)?.cancelled(c.reason);
        break;
      }
      case "tool_interaction_answer": {
        const a = f as ServerFrameMap["tool_interaction_answer"];
        const j = this.jobs.get(a.call_id);
        if (j?.openInteraction?.id === a.interaction_id) j.openInteraction = undefined;
        break;
      }
      case "tool_deferred_resume":
        this.onDeferredResume(f as ServerFrameMap["tool_deferred_resume"]);
        break;
      case "error": {
        // A frame over a limit is refused without its id (the broker did not read it), so the
        // refusal cannot be matched to its request: fail the silent requests that wait for
        // their barrier rather than let the barrier confirm one that was never applied.
        const e = f as ErrorFrame;
        if (!e.ref && e.code === "limit_exceeded") this.failUnconfirmed(e);
        break;
      }
      case "session.ended":
        this.emit("frame", f);
        this.emit("session.ended", f as ServerFrameMap["session.ended"]);
        this.onSessionEnded((f as ServerFrameMap["session.ended"]).reason);
        return;
    }
    this.emit("frame", f);
    if (SERVER_TYPES.has(f.type)) this.emit(f.type as ServerFrameType, f as never);
  }

  /** Settles the request r with its answer f. */
  private answer(r: Req, f: ServerFrame): void {
    if (r.kind === "barrier") {
      this.settle(r, f);
      for (const s of r.covers ?? []) this.settle(s, undefined);
      return;
    }
    if (r.kind === "sync") {
      this.settle(r, f);
      this.syncDone();
      return;
    }
    if (f.type === "error") {
      const e = f as ErrorFrame;
      const job = r.frame.type === "tool_result"
        ? this.jobOf(r.frame.call_id ? { callId: r.frame.call_id } : { handle: r.frame.handle ?? "" })
        : undefined;
      if (r.rule === "result" && r.resent && e.code === "call_finished" && !(job && this.cancelledJobs.has(job.callId))) {
        // The first result, sent just before the drop, was the one applied.
        this.settle(r, undefined);
        return;
      }
      this.settle(r, undefined, new BrokerError(r.frame.type, e));
      return;
    }
    if (r.kind === "end") return; // settled by session.ended
    try {
      this.settle(r, r.onAnswer ? r.onAnswer(f) : f);
    } catch (e) {
      this.settle(r, undefined, e as Error);
    }
  }

  /** Fails every silent request still waiting for its barrier with the error frame e. */
  private failUnconfirmed(e: ErrorFrame): void {
    for (const r of [...this.pending.values()]) {
      if (r.kind === "silent" && !r.done) this.settle(r, undefined, new BrokerError(r.frame.type, e));
    }
  }

  /** After a resume's sync barrier: resend what the broker never applied. */
  private syncDone(): void {
    this.syncing = false;
    const resend: Req[] = [];
    for (const r of [...this.pending.values()]) {
      if (r.gen >= this.gen || r.done) continue;
      this.pending.delete(r.id);
      if (r.kind === "barrier" || r.kind === "sync") continue;
      if (r.kind === "silent" && r.rule === "never") {
        this.settle(r, undefined, new UnconfirmedError(`backchannel: the connection dropped before the broker confirmed ${r.frame.type}; it may or may not have been applied`));
        continue;
      }
      r.written = false;
      r.resent = true;
      resend.push(r);
    }
    resend.sort((a, b) => a.order - b.order);
    this.queue = [...resend, ...this.queue];
    const jobs = this.resumedJobs ?? [];
    this.resumedJobs = null;
    const calls = jobs.map((j) => this.calls.get(j.call_id)).filter((c): c is ToolCall => !!c);
    this.emit("resumed", { jobs, calls, lastSeq: this.lastSeq });
    this.flush();
  }

  private onToolCallFrame(f: ToolCallFrame): void {
    if (this.calls.has(f.call_id)) return;
    this.jobs.set(f.call_id, { callId: f.call_id, name: f.name, arguments: f.arguments, state: "pending" });
    const call = new ToolCall(this, f.call_id, f.name, f.arguments, f);
    this.calls.set(f.call_id, call);
    for (const h of this.handlers) {
      Promise.resolve()
        .then(() => h(call))
        .then(
          (v) => {
            if (v !== undefined && (call.state === "pending" || call.state === "deferred")) return call.result(v as JSONValue);
            return undefined;
          },
          (e: unknown) => {
            if (call.state === "pending" || call.state === "deferred") {
              return call.fail(e instanceof Error ? e.message : String(e));
            }
            return undefined;
          },
        )
        .catch((e: unknown) => this.emit("warning", { message: `answering ${f.name} (${f.call_id}): ${(e as Error).message}` }));
    }
  }

  private onDeferredResume(f: ServerFrameMap["tool_deferred_resume"]): void {
    this.resumedJobs = f.jobs;
    const listed = new Set(f.jobs.map((j) => j.call_id));
    for (const rj of f.jobs) {
      const j = this.jobs.get(rj.call_id);
      if (j) {
        j.state = rj.state;
        j.handle = rj.handle;
        j.deadlineMs = rj.deadline_ms;
        j.openInteraction = rj.open_interaction;
      } else {
        this.jobs.set(rj.call_id, {
          callId: rj.call_id, name: rj.name, arguments: rj.arguments, state: rj.state, handle: rj.handle,
          statusLabel: rj.status_label || undefined, deadlineMs: rj.deadline_ms, openInteraction: rj.open_interaction,
        });
      }
      if (!this.calls.has(rj.call_id)) {
        this.calls.set(rj.call_id, new ToolCall(this, rj.call_id, rj.name, rj.arguments));
      }
    }
    // Deferred jobs it leaves out ended while the client was away.
    for (const j of this.jobs.values()) {
      if (j.state === "deferred" && !listed.has(j.callId)) j.state = "cancelled";
    }
  }

  private onTrack(stream: MediaStream): void {
    this.stream = stream;
    if (this.opts.audioElement !== null && typeof Audio !== "undefined") {
      const el = this.opts.audioElement ?? (this.audioEl ??= new Audio());
      el.autoplay = true;
      el.srcObject = stream;
      void el.play().catch(() => this.emit("warning", { message: "the agent's audio did not start playing (autoplay policy): call audioElement.play() after a click" }));
    }
    this.emit("track", stream);
  }

  private onAudio(chunk: Uint8Array): void {
    if (this.opts.playAudio !== false) (this.player ??= new ChunkPlayer()).play(chunk);
    this.emit("audio", chunk);
  }

  private onClosed(gen: number, reason: string): void {
    if (gen !== this.gen) return;
    if (this.handshake) {
      this.handshake(new BackchannelError(`backchannel: ${reason} before the welcome`));
      return;
    }
    if (!this.transport) return;
    this.transport = null;
    if (this.state !== "open") return;
    this.setState("reconnecting");
    this.emit("dropped", { reason });
    if (this.opts.reconnect === false) {
      this.shutdown("closed", new ClosedError(`backchannel: the connection dropped (${reason}) and reconnect is off`));
      return;
    }
    void this.reconnect(reason);
  }

  /** Resumes the slot on a new transport with backoff and jitter, until the resume window passed. */
  private async reconnect(reason: string): Promise<void> {
    const o = this.opts.reconnect || {};
    const initial = o.initialDelayMs ?? 250;
    const maxDelay = o.maxDelayMs ?? 5000;
    const mult = o.multiplier ?? 2;
    const jitter = o.jitter ?? 0.5;
    const maxElapsed = o.maxElapsedMs ?? this.resumeWindowMs;
    const start = Date.now();
    let last: unknown = new BackchannelError(reason);
    for (let attempt = 1; ; attempt++) {
      if (attempt > 1) {
        const base = Math.min(maxDelay, initial * mult ** (attempt - 2));
        const delay = Math.round(base * (1 - jitter + 2 * jitter * Math.random()));
        if (Date.now() - start + delay > maxElapsed) {
          this.shutdown("closed", new ClosedError(`backchannel: gave up resuming after ${Date.now() - start} ms: ${(last as Error).message}`));
          return;
        }
        this.emit("reconnecting", { attempt, delayMs: delay });
        await new Promise<void>((resolve) => {
          const t = setTimeout(() => {
            this.wakeReconnect = null;
            resolve();
          }, delay);
          this.wakeReconnect = () => {
            clearTimeout(t);
            resolve();
          };
        });
      } else {
        this.emit("reconnecting", { attempt, delayMs: 0 });
      }
      if (this.state !== "reconnecting") return;
      try {
        await this.open(true);
        return;
      } catch (e) {
        if (this.state !== "reconnecting") return;
        last = e;
        if (permanent(e)) {
          this.shutdown("closed", e as Error);
          return;
        }
      }
    }
  }

  private onSessionEnded(reason: EndReason): void {
    if (this.state === "ended") return;
    this.endReason = reason;
    for (const r of [...this.pending.values(), ...this.queue]) {
      if (r.kind === "end") this.settle(r, undefined);
    }
    this.shutdown("ended", new SessionEndedError(reason));
  }

  /** Stops everything: the transport, the reconnects, the audio; every request still open fails with err. */
  private shutdown(state: "closed" | "ended", err: Error | undefined): void {
    if (this.state === "closed" || this.state === "ended") return;
    this.gen++;
    this.opening?.abort();
    this.opening = null;
    this.wakeReconnect?.();
    this.handshake?.(err ?? new ClosedError("backchannel: closed"));
    const tr = this.transport;
    this.transport = null;
    tr?.close();
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    const fail = err ?? new ClosedError("backchannel: the client was closed");
    for (const r of [...this.pending.values(), ...this.queue]) this.settle(r, undefined, fail);
    this.queue = [];
    this.pending.clear();
    this.micEncoder?.stop();
    this.micEncoder = null;
    this.player?.close();
    this.player = null;
    if (this.ownMic) this.mic?.stop();
    if (this.audioEl) this.audioEl.srcObject = null;
    this.setState(state);
    this.emit("closed", { error: err });
  }
}

const SERVER_TYPES: ReadonlySet<string> = new Set(SERVER_FRAME_TYPES);

/** Creates a Client and connects it (see Client.connect). */
export async function connect(opts: ConnectOptions): Promise<Client> {
  const c = new Client();
  await c.connect(opts);
  return c;
}
