// Builders of the client frames the SDK sends, from the SDK's camelCase arguments. The Client
// uses them for every frame it writes; the tests check them against
// frames/testdata/examples.json.

import {
  PROTOCOL, jobTarget,
  type CallerTextFrame, type InjectFrame, type Interaction, type InteractionState, type JSONValue, type JobCancelFrame,
  type JobRef, type HelloFrame, type Role, type SessionEndFrame, type ToolDecl, type ToolDeferredFrame,
  type ToolInteractionUpdateFrame, type ToolPartialResultFrame, type ToolProgressFrame, type ToolResultFrame,
  type ToolsDeclareFrame,
} from "./frames.js";

/** What a hello says (SPEC 3.2, 10). */
export interface HelloParams {
  id?: string;
  role: Role;
  sessionId?: string;
  apiKey?: string;
  joinToken?: string;
  callerToken?: string;
  resumeToken?: string;
  lastSeq?: number;
  tools?: ToolDecl[];
}

/** Leaves out the fields whose value is undefined, as the Go encoder leaves out empty optional fields. */
function compact<T extends object>(o: T): T {
  for (const k of Object.keys(o) as (keyof T)[]) {
    if (o[k] === undefined) delete o[k];
  }
  return o;
}

export function helloFrame(p: HelloParams): HelloFrame {
  return compact<HelloFrame>({
    type: "hello", id: p.id, protocol: PROTOCOL, role: p.role, session_id: p.sessionId || undefined,
    api_key: p.apiKey || undefined, join_token: p.joinToken || undefined, caller_token: p.callerToken || undefined,
    resume_token: p.resumeToken || undefined,
    last_seq: p.lastSeq || undefined, tools: p.tools && p.tools.length > 0 ? p.tools : undefined,
  });
}

export function toolsDeclareFrame(tools: ToolDecl[], id?: string): ToolsDeclareFrame {
  return compact<ToolsDeclareFrame>({ type: "tools.declare", id, tools });
}

/** Options of a defer (SPEC 6). */
export interface DeferOptions {
  /** The host-chosen name of the job: unique per tenant, never reusable, 1 to 128 bytes. */
  handle: string;
  /** How the agent names the running job ("booking your table"). */
  statusLabel?: string;
}

export function toolDeferredFrame(callId: string, o: DeferOptions, id?: string): ToolDeferredFrame {
  return compact<ToolDeferredFrame>({
    type: "tool_deferred", id, call_id: callId, handle: o.handle, status_label: o.statusLabel || undefined,
  });
}

export function toolProgressFrame(ref: JobRef, note: string, id?: string): ToolProgressFrame {
  return compact<ToolProgressFrame>({ type: "tool_progress", id, ...jobTarget(ref), note });
}

/** Options of a partial result (SPEC 7, 9). */
export interface PartialResultOptions {
  /** Narrate the segment as a milestone when the floor is free. */
  reply?: boolean;
  /** The stage of the job the segment belongs to. */
  phase?: string;
  /** A decision to put to the caller; the SDK gives it an id ("ia_…") when it has none. */
  interaction?: Interaction;
}

export function toolPartialResultFrame(ref: JobRef, segment: JSONValue, o: PartialResultOptions = {}, id?: string): ToolPartialResultFrame {
  return compact<ToolPartialResultFrame>({
    type: "tool_partial_result", id, ...jobTarget(ref), segment, reply: o.reply || undefined,
    phase: o.phase || undefined, interaction: o.interaction,
  });
}

export function toolResultFrame(ref: JobRef, output: JSONValue | undefined, id?: string): ToolResultFrame {
  return compact<ToolResultFrame>({
    type: "tool_result", id, ...jobTarget(ref), output: output === undefined || output === null ? "" : output,
  });
}

export function toolErrorFrame(ref: JobRef, message: string, id?: string): ToolResultFrame {
  return compact<ToolResultFrame>({ type: "tool_result", id, ...jobTarget(ref), error: message || "tool failed" });
}

export function jobCancelFrame(ref: JobRef, id?: string): JobCancelFrame {
  return compact<JobCancelFrame>({ type: "job.cancel", id, ...jobTarget(ref) });
}

export function toolInteractionUpdateFrame(ref: JobRef, interactionId: string, state: InteractionState, id?: string): ToolInteractionUpdateFrame {
  return compact<ToolInteractionUpdateFrame>({
    type: "tool_interaction_update", id, ...jobTarget(ref), interaction_id: interactionId, state,
  });
}

/** Options of an inject (SPEC 8). */
export interface InjectOptions {
  /** false: only add the text to the agent's context; default true (a spoken turn). */
  speak?: boolean;
}

export function injectFrame(text: string, o: InjectOptions = {}, id?: string): InjectFrame {
  return compact<InjectFrame>({ type: "inject", id, text, speak: o.speak === false ? false : undefined });
}

export function sessionEndFrame(id?: string): SessionEndFrame {
  return compact<SessionEndFrame>({ type: "session.end", id });
}

export function callerTextFrame(text: string, id?: string): CallerTextFrame {
  return compact<CallerTextFrame>({ type: "caller.text", id, text });
}
