// The wire vocabulary of the Backchannel protocol, as the browser SDK sees it: the frames it
// sends (client → broker) and every frame the broker sends (broker → client), one interface per
// frame with the wire's own snake_case field names, plus the tables that decode and check them
// at run time. It mirrors the Go package frames (SPEC sections 2–17); the tests check it
// against frames/testdata/examples.json.

/** The protocol version every hello names (SPEC 3.2). */
export const PROTOCOL = "backchannel.v1";

/** Any JSON value (arguments, outputs, segments). */
export type JSONValue = null | boolean | number | string | JSONValue[] | { [key: string]: JSONValue };

/** The role of a connection (SPEC 1). */
export type Role = "host" | "caller" | "agent";
/** The states of a job (SPEC 5). */
export type JobState =
  | "awaiting_permission" | "pending" | "deferred" | "completed" | "failed" | "cancelled" | "timed_out" | "declined";
/** Why a job is cancelled (SPEC 11). */
export type CancelReason =
  | "timeout" | "discard" | "caller_request" | "agent_request" | "host_request" | "parent_cancelled";
/** The answer to job.cancel (SPEC 5). */
export type CancelResult = "cancelled" | "already_done" | "already_canceled" | "unknown_call";
/** Why a defer was rejected (SPEC 6). */
export type DeferAckReason =
  | "invalid_handle" | "unknown_call" | "call_not_pending" | "not_deferrable" | "handle_reserved"
  | "handle_in_use" | "handle_burned";
/** What a narration voices (SPEC 8). */
export type NarrationKind = "milestone" | "interaction" | "completion";
/** A step of a narration's lifecycle (SPEC 8). */
export type NarrationState =
  | "queued" | "speaking" | "delivered" | "interrupted" | "skipped" | "stopped" | "failed";
/** Why a completion could not be voiced (SPEC 8). */
export type DeliveryFailureReason = "no_audible_speech" | "model_error" | "session_ended" | "floor_timeout";
/** How a host closes an interaction (SPEC 9). */
export type InteractionState = "resolved" | "cancelled" | "superseded";
/** The answer to tool_interaction_update (SPEC 9). */
export type InteractionUpdateResult = "applied" | "already_closed" | "unknown_interaction";
/** Why a session ended (SPEC 3.6). */
export type EndReason = "ended" | "hung_up" | "resume_expired";
/** How a tool's hand-off is phrased (SPEC 4). */
export type ExpectedDuration = "instant" | "seconds" | "minutes" | "hours";
/** The kind of a text agent's tool result (SPEC 13). */
export type ToolResultKind = "result" | "background_placeholder" | "error";
/** The error codes of SPEC 2.1. */
export type ErrorCode =
  | "bad_frame" | "unknown_frame" | "unauthorized" | "forbidden" | "not_found" | "limit_exceeded"
  | "unknown_call" | "call_not_pending" | "call_finished" | "inject_rejected" | "session_ended"
  | "resume_expired" | "resume_invalid" | "internal";

/** A duration on the wire: milliseconds, or (in tool declarations) a Go-style string like "90s" or "2h". */
export type Duration = number | string;

/** One tool a host serves (SPEC 4). */
export interface ToolDecl {
  /** ^[a-zA-Z0-9_-]{1,64}$, unique within one declaration. */
  name: string;
  description: string;
  /** The JSON Schema (an object) the call's arguments must satisfy. */
  parameters: { [key: string]: JSONValue };
  /** The ordinary timeout: default 10 s, at most 120 s. */
  timeout?: Duration;
  /** The call may be acknowledged with tool_deferred (SPEC 6). */
  deferred?: boolean;
  /** The job clock after an accepted defer: default 2 h, at most 24 h; only with deferred. */
  deferred_timeout?: Duration;
  /** Every call waits for the caller's spoken approval (SPEC 12). */
  requires_permission?: boolean;
  expected_duration?: ExpectedDuration;
  /** Voice the completion; default true when deferred. */
  notify_on_complete?: boolean;
}

/** A decision a job puts to the caller (SPEC 9). */
export interface Interaction {
  /** Absent, the broker assigns "ia_…". */
  id?: string;
  prompt: string;
  /** The accepted answers; absent, any non-empty reply answers. */
  options?: string[];
}

/** An open deferred job listed by tool_deferred_resume (SPEC 10). */
export interface ResumedJob {
  call_id: string;
  handle: string;
  name: string;
  arguments: JSONValue;
  status_label: string;
  state: JobState;
  deadline_ms: number;
  open_interaction?: Interaction;
}

// ---- client → broker frames (the ones this SDK sends) ----

/** Fields every client frame may carry (SPEC 2). */
export interface RequestFields {
  /** The client's id for the frame (≤ 64 bytes); answers carry it as ref. */
  id?: string;
}

export interface HelloFrame extends RequestFields {
  type: "hello";
  protocol: string;
  role: Role;
  session_id?: string;
  api_key?: string;
  join_token?: string;
  caller_token?: string;
  resume_token?: string;
  last_seq?: number;
  tools?: ToolDecl[];
}
export interface ToolsDeclareFrame extends RequestFields {
  type: "tools.declare";
  tools: ToolDecl[];
}
export interface ToolDeferredFrame extends RequestFields {
  type: "tool_deferred";
  call_id: string;
  handle: string;
  status_label?: string;
}
export interface ToolProgressFrame extends RequestFields {
  type: "tool_progress";
  call_id?: string;
  handle?: string;
  note: string;
}
export interface ToolPartialResultFrame extends RequestFields {
  type: "tool_partial_result";
  call_id?: string;
  handle?: string;
  segment: JSONValue;
  reply?: boolean;
  phase?: string;
  interaction?: Interaction;
}
export interface ToolResultFrame extends RequestFields {
  type: "tool_result";
  call_id?: string;
  handle?: string;
  output?: JSONValue;
  error?: string;
}
export interface JobCancelFrame extends RequestFields {
  type: "job.cancel";
  call_id?: string;
  handle?: string;
}
export interface ToolInteractionUpdateFrame extends RequestFields {
  type: "tool_interaction_update";
  call_id?: string;
  handle?: string;
  interaction_id: string;
  state: InteractionState;
}
export interface InjectFrame extends RequestFields {
  type: "inject";
  text: string;
  speak?: boolean;
}
export interface SessionEndFrame extends RequestFields {
  type: "session.end";
}
export interface CallerTextFrame extends RequestFields {
  type: "caller.text";
  text: string;
}

/** The client frames this SDK sends, by type. */
export interface ClientFrameMap {
  "hello": HelloFrame;
  "tools.declare": ToolsDeclareFrame;
  "tool_deferred": ToolDeferredFrame;
  "tool_progress": ToolProgressFrame;
  "tool_partial_result": ToolPartialResultFrame;
  "tool_result": ToolResultFrame;
  "job.cancel": JobCancelFrame;
  "tool_interaction_update": ToolInteractionUpdateFrame;
  "inject": InjectFrame;
  "session.end": SessionEndFrame;
  "caller.text": CallerTextFrame;
}
export type ClientFrameType = keyof ClientFrameMap;
export type ClientFrame = ClientFrameMap[ClientFrameType];

// ---- broker → client frames ----

/** Fields every broker frame may carry (SPEC 2). */
export interface ReplyFields {
  /** The id of the client frame this frame answers. */
  ref?: string;
  /** Increases by one per frame sent to the connection's slot; absent only on welcome. */
  seq?: number;
}

/** The answer to a hello: it starts the connection and, alone of the broker frames, has no seq. */
export interface WelcomeFrame {
  type: "welcome";
  /** The id of the hello it answers. */
  ref?: string;
  session_id: string;
  connection_id: string;
  resume_token: string;
  resume_window_ms: number;
  heartbeat_ms: number;
  server_time_ms: number;
  join_token?: string;
}
export interface ErrorFrame extends ReplyFields {
  type: "error";
  code: ErrorCode;
  message: string;
  retryable: boolean;
  call_id?: string;
  handle?: string;
}
export interface ToolsDeclaredFrame extends ReplyFields {
  type: "tools.declared";
  names: string[];
}
export interface ToolCallFrame extends ReplyFields {
  type: "tool_call";
  call_id: string;
  name: string;
  arguments: JSONValue;
  deferred: boolean;
  timeout_ms: number;
  session_id: string;
}
export interface ToolDeferredAckFrame extends ReplyFields {
  type: "tool_deferred_ack";
  call_id: string;
  handle: string;
  accepted: boolean;
  reason?: DeferAckReason;
  deadline_ms?: number;
}
export interface JobCancelResultFrame extends ReplyFields {
  type: "job.cancel_result";
  call_id: string;
  handle?: string;
  result: CancelResult;
}
export interface ToolCancelFrame extends ReplyFields {
  type: "tool_cancel";
  call_id: string;
  handle?: string;
  reason: CancelReason;
}
export interface ToolJobNarrationFrame extends ReplyFields {
  type: "tool_job_narration";
  call_id: string;
  handle?: string;
  kind: NarrationKind;
  interaction_id?: string;
  state: NarrationState;
  attempt: number;
  response_id?: string;
}
export interface ToolJobDeliveryFailedFrame extends ReplyFields {
  type: "tool_job_delivery_failed";
  call_id: string;
  handle: string;
  attempts: number;
  reason: DeliveryFailureReason;
}
export interface ToolInteractionAnswerFrame extends ReplyFields {
  type: "tool_interaction_answer";
  call_id: string;
  handle?: string;
  interaction_id: string;
  option?: string;
  text: string;
}
export interface ToolInteractionUpdateAckFrame extends ReplyFields {
  type: "tool_interaction_update_ack";
  call_id?: string;
  handle?: string;
  interaction_id: string;
  state: InteractionState;
  result: InteractionUpdateResult;
}
export interface ToolDeferredResumeFrame extends ReplyFields {
  type: "tool_deferred_resume";
  jobs: ResumedJob[];
}
export interface SessionEndedFrame extends ReplyFields {
  type: "session.ended";
  reason: EndReason;
}
export interface TranscriptFrame extends ReplyFields {
  type: "transcript";
  role: Role;
  text: string;
  response_id?: string;
  final: boolean;
}
export interface AgentToolResultFrame extends ReplyFields {
  type: "agent.tool_result";
  call_id: string;
  kind: ToolResultKind;
  content: string;
}
export interface AgentPromptFrame extends ReplyFields {
  type: "agent.prompt";
  prompt_id: string;
  conversation_id: string;
  internal: boolean;
  text: string;
}
export interface AgentMessageCommittedFrame extends ReplyFields {
  type: "agent.message_committed";
  message_id: string;
}
export interface AgentLocalCancelFrame extends ReplyFields {
  type: "agent.local_cancel";
  call_id: string;
  conversation_id: string;
}
export interface ConversationCreatedFrame extends ReplyFields {
  type: "conversation.created";
  conversation_id: string;
}

/** Every broker → client frame, by type. */
export interface ServerFrameMap {
  "welcome": WelcomeFrame;
  "error": ErrorFrame;
  "tools.declared": ToolsDeclaredFrame;
  "tool_call": ToolCallFrame;
  "tool_deferred_ack": ToolDeferredAckFrame;
  "job.cancel_result": JobCancelResultFrame;
  "tool_cancel": ToolCancelFrame;
  "tool_job_narration": ToolJobNarrationFrame;
  "tool_job_delivery_failed": ToolJobDeliveryFailedFrame;
  "tool_interaction_answer": ToolInteractionAnswerFrame;
  "tool_interaction_update_ack": ToolInteractionUpdateAckFrame;
  "tool_deferred_resume": ToolDeferredResumeFrame;
  "session.ended": SessionEndedFrame;
  "transcript": TranscriptFrame;
  "agent.tool_result": AgentToolResultFrame;
  "agent.prompt": AgentPromptFrame;
  "agent.message_committed": AgentMessageCommittedFrame;
  "agent.local_cancel": AgentLocalCancelFrame;
  "conversation.created": ConversationCreatedFrame;
}
export type ServerFrameType = keyof ServerFrameMap;
export type ServerFrame = ServerFrameMap[ServerFrameType];

// ---- run-time tables ----

/**
 * The JSON kind of a field: a JSON type, "integer", "any" (any JSON value), a nested object
 * ("interaction", "resumed_job", "tool_decl") or a list of one ("…[]"), or "enum" (a string of
 * a closed set, checked on the broker's side).
 */
export type FieldKind =
  | "string" | "integer" | "boolean" | "object" | "any"
  | "string[]" | "interaction" | "resumed_job[]" | "tool_decl[]";
/** A field of a frame: its kind and whether it is required ("req") or optional ("opt"). */
export type FieldSpec<Opt extends boolean> = readonly [FieldKind, Opt extends true ? "opt" : "req"];

type IsOptional<T, K extends keyof T> = {} extends Pick<T, K> ? true : false;
/** The field table of one frame interface: exactly its fields (but type), each with the right "req"/"opt". */
export type FieldTable<T> = { readonly [K in Exclude<keyof T, "type">]-?: FieldSpec<IsOptional<T, K>> };

const id = ["string", "opt"] as const;
const ref = ["string", "opt"] as const;
const seq = ["integer", "opt"] as const;

/** The fields of every frame this SDK sends (compile-checked against the interfaces above). */
export const CLIENT_FIELDS: { readonly [K in ClientFrameType]: FieldTable<ClientFrameMap[K]> } = {
  "hello": {
    id, protocol: ["string", "req"], role: ["string", "req"], session_id: ["string", "opt"],
    api_key: ["string", "opt"], join_token: ["string", "opt"], caller_token: ["string", "opt"], resume_token: ["string", "opt"],
    last_seq: ["integer", "opt"], tools: ["tool_decl[]", "opt"],
  },
  "tools.declare": { id, tools: ["tool_decl[]", "req"] },
  "tool_deferred": { id, call_id: ["string", "req"], handle: ["string", "req"], status_label: ["string", "opt"] },
  "tool_progress": { id, call_id: ["string", "opt"], handle: ["string", "opt"], note: ["string", "req"] },
  "tool_partial_result": {
    id, call_id: ["string", "opt"], handle: ["string", "opt"], segment: ["any", "req"],
    reply: ["boolean", "opt"], phase: ["string", "opt"], interaction: ["interaction", "opt"],
  },
  "tool_result": {
    id, call_id: ["string", "opt"], handle: ["string", "opt"], output: ["any", "opt"], error: ["string", "opt"],
  },
  "job.cancel": { id, call_id: ["string", "opt"], handle: ["string", "opt"] },
  "tool_interaction_update": {
    id, call_id: ["string", "opt"], handle: ["string", "opt"], interaction_id: ["string", "req"],
    state: ["string", "req"],
  },
  "inject": { id, text: ["string", "req"], speak: ["boolean", "opt"] },
  "session.end": { id },
  "caller.text": { id, text: ["string", "req"] },
};

/** The fields of every broker frame (compile-checked against the interfaces above). */
export const SERVER_FIELDS: { readonly [K in ServerFrameType]: FieldTable<ServerFrameMap[K]> } = {
  "welcome": {
    ref, session_id: ["string", "req"], connection_id: ["string", "req"], resume_token: ["string", "req"],
    resume_window_ms: ["integer", "req"], heartbeat_ms: ["integer", "req"], server_time_ms: ["integer", "req"],
    join_token: ["string", "opt"],
  },
  "error": {
    ref, seq, code: ["string", "req"], message: ["string", "req"], retryable: ["boolean", "req"],
    call_id: ["string", "opt"], handle: ["string", "opt"],
  },
  "tools.declared": { ref, seq, names: ["string[]", "req"] },
  "tool_call": {
    ref, seq, call_id: ["string", "req"], name: ["string", "req"], arguments: ["any", "req"],
    deferred: ["boolean", "req"], timeout_ms: ["integer", "req"], session_id: ["string", "req"],
  },
  "tool_deferred_ack": {
    ref, seq, call_id: ["string", "req"], handle: ["string", "req"], accepted: ["boolean", "req"],
    reason: ["string", "opt"], deadline_ms: ["integer", "opt"],
  },
  "job.cancel_result": { ref, seq, call_id: ["string", "req"], handle: ["string", "opt"], result: ["string", "req"] },
  "tool_cancel": { ref, seq, call_id: ["string", "req"], handle: ["string", "opt"], reason: ["string", "req"] },
  "tool_job_narration": {
    ref, seq, call_id: ["string", "req"], handle: ["string", "opt"], kind: ["string", "req"],
    interaction_id: ["string", "opt"], state: ["string", "req"], attempt: ["integer", "req"],
    response_id: ["string", "opt"],
  },
  "tool_job_delivery_failed": {
    ref, seq, call_id: ["string", "req"], handle: ["string", "req"], attempts: ["integer", "req"],
    reason: ["string", "req"],
  },
  "tool_interaction_answer": {
    ref, seq, call_id: ["string", "req"], handle: ["string", "opt"], interaction_id: ["string", "req"],
    option: ["string", "opt"], text: ["string", "req"],
  },
  "tool_interaction_update_ack": {
    ref, seq, call_id: ["string", "opt"], handle: ["string", "opt"], interaction_id: ["string", "req"],
    state: ["string", "req"], result: ["string", "req"],
  },
  "tool_deferred_resume": { ref, seq, jobs: ["resumed_job[]", "req"] },
  "session.ended": { ref, seq, reason: ["string", "req"] },
  "transcript": {
    ref, seq, role: ["string", "req"], text: ["string", "req"], response_id: ["string", "opt"],
    final: ["boolean", "req"],
  },
  "agent.tool_result": { ref, seq, call_id: ["string", "req"], kind: ["string", "req"], content: ["string", "req"] },
  "agent.prompt": {
    ref, seq, prompt_id: ["string", "req"], conversation_id: ["string", "req"], internal: ["boolean", "req"],
    text: ["string", "req"],
  },
  "agent.message_committed": { ref, seq, message_id: ["string", "req"] },
  "agent.local_cancel": { ref, seq, call_id: ["string", "req"], conversation_id: ["string", "req"] },
  "conversation.created": { ref, seq, conversation_id: ["string", "req"] },
};

/** The nested objects of frames. */
export const NESTED_FIELDS: {
  readonly interaction: FieldTable<Interaction & { type?: never }>;
  readonly resumed_job: FieldTable<ResumedJob & { type?: never }>;
  readonly tool_decl: FieldTable<ToolDecl & { type?: never }>;
} = {
  interaction: { id: ["string", "opt"], prompt: ["string", "req"], options: ["string[]", "opt"] },
  resumed_job: {
    call_id: ["string", "req"], handle: ["string", "req"], name: ["string", "req"], arguments: ["any", "req"],
    status_label: ["string", "req"], state: ["string", "req"], deadline_ms: ["integer", "req"],
    open_interaction: ["interaction", "opt"],
  },
  tool_decl: {
    name: ["string", "req"], description: ["string", "req"], parameters: ["object", "req"],
    // Durations are milliseconds or Go-style strings: checked by the broker.
    timeout: ["any", "opt"], deferred: ["boolean", "opt"], deferred_timeout: ["any", "opt"],
    requires_permission: ["boolean", "opt"], expected_duration: ["string", "opt"],
    notify_on_complete: ["boolean", "opt"],
  },
};

/** Every broker → client frame type, in the order of SPEC (and of the Go package frames). */
export const SERVER_FRAME_TYPES: readonly ServerFrameType[] = Object.freeze(
  Object.keys(SERVER_FIELDS) as ServerFrameType[],
);
/** Every client → broker frame type this SDK sends. */
export const CLIENT_FRAME_TYPES: readonly ClientFrameType[] = Object.freeze(
  Object.keys(CLIENT_FIELDS) as ClientFrameType[],
);

/** A frame that could not be decoded: not JSON, not an object, or a field of the wrong kind. */
export class FrameDecodeError extends Error {
  override name = "FrameDecodeError";
}

/** A broker frame of a type this SDK does not know (a newer protocol revision): passed on as it is. */
export interface UnknownServerFrame extends ReplyFields {
  type: string;
  [field: string]: unknown;
}

function kindOf(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  return typeof v;
}

function checkField(path: string, kind: FieldKind, v: unknown): void {
  const bad = (want: string) => {
    throw new FrameDecodeError(`field ${path} must be ${want}, not ${kindOf(v)}`);
  };
  switch (kind) {
    case "string":
      if (typeof v !== "string") bad("a string");
      return;
    case "integer":
      if (typeof v !== "number" || !Number.isInteger(v)) bad("an integer");
      return;
    case "boolean":
      if (typeof v !== "boolean") bad("a boolean");
      return;
    case "object":
      if (kindOf(v) !== "object") bad("an object");
      return;
    case "any":
      return;
    case "string[]":
      if (!Array.isArray(v)) bad("an array of strings");
      (v as unknown[]).forEach((e, i) => checkField(`${path}[${i}]`, "string", e));
      return;
    case "interaction":
      checkObject(path, NESTED_FIELDS.interaction, v);
      return;
    case "resumed_job[]":
      if (!Array.isArray(v)) bad("an array");
      (v as unknown[]).forEach((e, i) => checkObject(`${path}[${i}]`, NESTED_FIELDS.resumed_job, e));
      return;
    case "tool_decl[]":
      if (!Array.isArray(v)) bad("an array");
      (v as unknown[]).forEach((e, i) => checkObject(`${path}[${i}]`, NESTED_FIELDS.tool_decl, e));
      return;
  }
}

function checkObject(path: string, table: { readonly [f: string]: readonly [FieldKind, "req" | "opt"] }, v: unknown): void {
  if (kindOf(v) !== "object") {
    throw new FrameDecodeError(`${path ? "field " + path : "a frame"} must be an object, not ${kindOf(v)}`);
  }
  const o = v as Record<string, unknown>;
  for (const [name, [kind, req]] of Object.entries(table)) {
    const fv = o[name];
    const p = path ? `${path}.${name}` : name;
    if (fv === undefined || fv === null) {
      // JSON null counts as absent, as in the Go decoder, except for "any" fields.
      if (req === "req" && !(fv === null && kind === "any")) {
        throw new FrameDecodeError(`missing required field ${p}`);
      }
      continue;
    }
    checkField(p, kind, fv);
  }
}

/**
 * Decodes one broker frame (the text of a WebSocket or data-channel message) and checks the
 * fields this SDK knows: their JSON kinds and the required ones. Unknown fields are kept and
 * ignored (SPEC 2); a frame of an unknown type is returned as it is. Throws FrameDecodeError.
 */
export function decodeServerFrame(text: string): ServerFrame | UnknownServerFrame {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new FrameDecodeError(`not JSON: ${(e as Error).message}`);
  }
  if (kindOf(v) !== "object") throw new FrameDecodeError(`a frame must be a JSON object, not ${kindOf(v)}`);
  const o = v as Record<string, unknown>;
  if (typeof o.type !== "string") throw new FrameDecodeError("missing required field type");
  const table = (SERVER_FIELDS as Record<string, FieldTable<object>>)[o.type];
  if (!table) return o as UnknownServerFrame;
  checkObject("", table as never, o);
  return o as unknown as ServerFrame;
}

/** Checks a client frame against its table (the same rules), throwing FrameDecodeError. */
export function checkClientFrame(f: ClientFrame): void {
  const table = (CLIENT_FIELDS as Record<string, FieldTable<object>>)[f.type];
  if (!table) throw new FrameDecodeError(`unknown client frame type ${JSON.stringify(f.type)}`);
  checkObject("", table as never, f);
}

/**
 * Encodes a client frame as the JSON text of one message, with "type" first and absent
 * (undefined) fields left out.
 */
export function encodeClientFrame(f: ClientFrame): string {
  const { type, ...rest } = f;
  return JSON.stringify({ type, ...rest });
}

/** The form of a broker call id: "call_" and 20 characters of [a-z2-7] (SPEC 5). */
export const CALL_ID_PATTERN = /^call_[a-z2-7]{20}$/;

/**
 * Names a job in frames: a string is a broker call id when it has the form of one (a handle
 * never has: SPEC 6 reserves it), else a handle; or an explicit {callId} / {handle}.
 */
export type JobRef = string | { callId: string } | { handle: string };

/** The call_id / handle fields that name ref. */
export function jobTarget(ref: JobRef): { call_id?: string; handle?: string } {
  if (typeof ref === "string") {
    if (ref === "") throw new TypeError("backchannel: a job reference is empty: pass a call id or a handle");
    return CALL_ID_PATTERN.test(ref) ? { call_id: ref } : { handle: ref };
  }
  if ("callId" in ref && ref.callId) return { call_id: ref.callId };
  if ("handle" in ref && ref.handle) return { handle: ref.handle };
  throw new TypeError("backchannel: a job reference needs callId or handle");
}
