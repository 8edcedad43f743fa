// @backchannel/sdk: the browser SDK of the Backchannel broker.

export { BARRIER_CALL_ID, Client, ToolCall, connect } from "./client.js";
export type { ClientEvents, ClientState, ConnectOptions, JobInfo, ReconnectOptions, ResumeState } from "./client.js";
export {
  BackchannelError, BrokerError, ClosedError, DeferRejectedError, SessionEndedError, UnconfirmedError,
} from "./errors.js";
export * from "./frames.js";
export * from "./build.js";
export { ulawDecode, ulawEncode, SAMPLE_RATE, SAMPLES_PER_CHUNK } from "./audio.js";
export { HTTPError, WebRTCTransportFactory, WebSocketTransportFactory, webSocketURL } from "./transport.js";
export type { OpenParams, Transport, TransportEvents, TransportFactory, WebRTCOptions } from "./transport.js";
export type { Unsubscribe } from "./emitter.js";
