// The errors the SDK's promises reject with.

import type { DeferAckReason, EndReason, ErrorCode, ErrorFrame, ToolDeferredAckFrame } from "./frames.js";

/** The base class of every error of the SDK. */
export class BackchannelError extends Error {
  override name = "BackchannelError";
}

/**
 * The broker answered a frame with an error frame (SPEC 2.1): `code` says what went wrong
 * (call_finished for a result after the job ended, for example), `frame` is the error frame.
 */
export class BrokerError extends BackchannelError {
  override name = "BrokerError";
  readonly code: ErrorCode;
  readonly retryable: boolean;
  readonly frame: ErrorFrame;
  constructor(what: string, frame: ErrorFrame) {
    super(`backchannel: ${what}: ${frame.code}: ${frame.message}`);
    this.code = frame.code;
    this.retryable = frame.retryable;
    this.frame = frame;
  }
}

const deferAdvice: Record<string, string> = {
  invalid_handle: "a handle is 1 to 128 bytes without control characters",
  unknown_call: "the broker does not know the call",
  call_not_pending: "the call is no longer pending (cancelled, timed out, answered, or deferred under another handle)",
  not_deferrable: "declare the tool with deferred: true",
  handle_reserved: "a handle may not have the form of a broker call id (call_ and 20 characters a-z2-7)",
  handle_in_use: "another open job holds it; choose a fresh handle",
  handle_burned: "handles are never reusable; choose a fresh one",
};

/**
 * sendToolDeferred rejects with this when the broker answered tool_deferred_ack with
 * accepted: false (SPEC 6). The call stays pending on its ordinary timeout: answer it with
 * sendResult, or defer it again under another handle.
 */
export class DeferRejectedError extends BackchannelError {
  override name = "DeferRejectedError";
  /** The broker's reason: invalid_handle, unknown_call, call_not_pending, not_deferrable, handle_reserved, handle_in_use or handle_burned. */
  readonly reason: DeferAckReason;
  readonly callId: string;
  readonly handle: string;
  readonly ack: ToolDeferredAckFrame;
  constructor(ack: ToolDeferredAckFrame) {
    const reason = ack.reason ?? ("unknown" as DeferAckReason);
    const advice = deferAdvice[reason];
    super(`backchannel: defer of call ${ack.call_id} as ${JSON.stringify(ack.handle)} rejected: ${reason}${advice ? ": " + advice : ""}`);
    this.reason = reason;
    this.callId = ack.call_id;
    this.handle = ack.handle;
    this.ack = ack;
  }
}

/** Requests made after the session ended reject with this; `reason` is that of session.ended. */
export class SessionEndedError extends BackchannelError {
  override name = "SessionEndedError";
  readonly reason: EndReason;
  constructor(reason: EndReason) {
    super(`backchannel: the session ended (${reason})`);
    this.reason = reason;
  }
}

/** Requests made after close(), or pending when the client gave up reconnecting, reject with this. */
export class ClosedError extends BackchannelError {
  override name = "ClosedError";
}

/**
 * A request whose frame was sent just before the transport dropped, when the broker's answer
 * cannot tell whether it was applied and repeating it could apply it twice (a milestone would
 * be narrated twice, an ask asked again, an inject spoken twice). Check the job before repeating it.
 */
export class UnconfirmedError extends BackchannelError {
  override name = "UnconfirmedError";
}
