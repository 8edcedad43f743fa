// The two transports of a browser client: WebRTC (an audio track each way and the data channel
// "frames", SPEC 1 and broker/webrtc) and WebSocket (/v1/ws, binary messages for audio, SPEC 17).
// A transport carries frames as text and knows nothing of the protocol; the Client speaks it.

import { BackchannelError } from "./errors.js";

/** What a transport reports to the client. */
export interface TransportEvents {
  /** One frame (the text of one message). */
  message(text: string): void;
  /** One chunk of agent audio (µ-law) that arrived as a message (WebSocket only). */
  audio(chunk: Uint8Array): void;
  /** The agent's audio track (WebRTC only). */
  track(stream: MediaStream): void;
  /** The transport is gone (a drop, unless the client closed it). Called once. */
  closed(reason: string): void;
}

/** One open connection to the broker. */
export interface Transport {
  /** "webrtc" or "websocket" (or a test's own). */
  readonly kind: string;
  /** Sends one frame. */
  send(text: string): void;
  /** Sends caller audio as a message (WebSocket only). */
  sendAudio?(chunk: Uint8Array): void;
  /** Closes the transport; `closed` is not reported for it. */
  close(): void;
  /** The peer connection (WebRTC only). */
  readonly peerConnection?: RTCPeerConnection;
  /** The resource whose DELETE hangs up (WebRTC only). */
  readonly resource?: string;
}

/** What opening a transport needs. */
export interface OpenParams {
  /** The broker's base URL, http(s)://host:port. */
  baseURL: string;
  /** The session (WebRTC signaling is per session). */
  sessionId: string;
  /** The bearer for HTTP: the join token, or an API key of the session's tenant. */
  bearer: string;
  /** The caller's microphone track, when there is one. */
  microphone: MediaStreamTrack | null;
  /** Aborts the opening. */
  signal: AbortSignal;
}

/** Opens transports; the client opens one per connection attempt. */
export interface TransportFactory {
  /** Resolves once frames can be sent (the hello goes first). */
  open(params: OpenParams, events: TransportEvents): Promise<Transport>;
}

/** An HTTP answer that is not a success: `status` and the broker's {code, message} body. */
export class HTTPError extends BackchannelError {
  override name = "HTTPError";
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
  }
}

/** Reads a broker error body {code, message} into an HTTPError. */
export async function httpError(what: string, resp: Response): Promise<HTTPError> {
  let code = "";
  let message = "";
  try {
    const body = (await resp.json()) as { code?: string; message?: string };
    code = body.code ?? "";
    message = body.message ?? "";
  } catch {
    // not JSON: the status says it
  }
  return new HTTPError(resp.status, code, `backchannel: ${what}: HTTP ${resp.status}${code ? " " + code : ""}${message ? ": " + message : ""}`);
}

/** Options of the WebRTC transport. */
export interface WebRTCOptions {
  /** STUN/TURN servers (none by default: the broker's answer carries its candidates). */
  iceServers?: RTCIceServer[];
  /** How long to gather ICE candidates before the offer is sent anyway (default 5000 ms). */
  gatherTimeoutMs?: number;
  /** How long the data channel may take to open after the answer (default 15000 ms). */
  openTimeoutMs?: number;
}

function abortable<T>(signal: AbortSignal, p: Promise<T>): Promise<T> {
  if (signal.aborted) return Promise.reject(new BackchannelError("backchannel: aborted"));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new BackchannelError("backchannel: aborted"));
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (v) => { signal.removeEventListener("abort", onAbort); resolve(v); },
      (e) => { signal.removeEventListener("abort", onAbort); reject(e); },
    );
  });
}

/** Waits until ICE gathering is complete, or ms passed (non-trickle: the offer carries every candidate). */
function gathered(pc: RTCPeerConnection, ms: number): Promise<void> {
  if (pc.iceGatheringState === "complete") return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      pc.removeEventListener("icegatheringstatechange", check);
      resolve();
    };
    const check = () => {
      if (pc.iceGatheringState === "complete") done();
    };
    const timer = setTimeout(done, ms);
    pc.addEventListener("icegatheringstatechange", check);
  });
}

/**
 * The WebRTC transport: one RTCPeerConnection with an audio transceiver (sendrecv, the
 * microphone when there is one) and the data channel "frames", negotiated by one POST of the
 * complete offer to /v1/sessions/{id}/webrtc (answered 201 with the complete answer and the
 * Location of the resource whose DELETE hangs up).
 */
export class WebRTCTransportFactory implements TransportFactory {
  constructor(private readonly opts: WebRTCOptions = {}) {}

  async open(p: OpenParams, ev: TransportEvents): Promise<Transport> {
    const pc = new RTCPeerConnection({ iceServers: this.opts.iceServers ?? [] });
    let done = false;
    let watchdog: ReturnType<typeof setInterval> | undefined;
    const finish = (reason: string, report: boolean) => {
      if (done) return;
      done = true;
      if (watchdog !== undefined) clearInterval(watchdog);
      try {
        pc.close();
      } catch {
        // already closed
      }
      if (report) ev.closed(reason);
    };
    try {
      const stream = p.microphone ? new MediaStream([p.microphone]) : undefined;
      pc.addTransceiver(p.microphone ?? "audio", { direction: "sendrecv", streams: stream ? [stream] : [] });
      const dc = pc.createDataChannel("frames", { ordered: true });
      dc.binaryType = "arraybuffer";
      pc.addEventListener("track", (e) => {
        if (e.track.kind === "audio") ev.track(e.streams[0] ?? new MediaStream([e.track]));
      });
      const opened = new Promise<void>((resolve, reject) => {
        dc.addEventListener("open", () => resolve(), { once: true });
        dc.addEventListener("close", () => reject(new BackchannelError("backchannel: the data channel closed before it opened")), { once: true });
      });
      opened.catch(() => {});
      await abortable(p.signal, pc.setLocalDescription(await pc.createOffer()));
      await abortable(p.signal, gathered(pc, this.opts.gatherTimeoutMs ?? 5000));
      const url = `${p.baseURL}/v1/sessions/${encodeURIComponent(p.sessionId)}/webrtc`;
      const resp = await fetch(url, {
        method: "POST",
        headers: { "Content-Type": "application/sdp", Authorization: `Bearer ${p.bearer}` },
        body: pc.localDescription!.sdp,
        signal: p.signal,
      });
      if (resp.status !== 201) throw await httpError("WebRTC offer", resp);
      const location = resp.headers.get("Location");
      const resource = location ? new URL(location, p.baseURL + "/").toString() : undefined;
      await abortable(p.signal, pc.setRemoteDescription({ type: "answer", sdp: await resp.text() }));
      const openTimeout = this.opts.openTimeoutMs ?? 15000;
      let timer: ReturnType<typeof setTimeout> | undefined;
      await abortable(p.signal, Promise.race([
        opened,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new BackchannelError(`backchannel: the data channel did not open within ${openTimeout} ms (ICE: ${pc.iceConnectionState})`)), openTimeout);
        }),
      ])).finally(() => clearTimeout(timer));

      const decoder = new TextDecoder();
      dc.addEventListener("message", (e: MessageEvent) => {
        if (done) return;
        ev.message(typeof e.data === "string" ? e.data : decoder.decode(e.data as ArrayBuffer));
      });
      dc.addEventListener("close", () => finish("the data channel closed", true));
      pc.addEventListener("connectionstatechange", () => {
        if (pc.connectionState === "failed" || pc.connectionState === "closed") {
          finish(`the peer connection is ${pc.connectionState}`, true);
        }
      });
      // pc.close() fires no event of its own: notice it (and a data channel that closed
      // without telling) by looking.
      watchdog = setInterval(() => {
        if (pc.signalingState === "closed" || pc.connectionState === "closed") finish("the peer connection was closed", true);
        else if (dc.readyState === "closed") finish("the data channel closed", true);
      }, 250);
      return {
        kind: "webrtc",
        peerConnection: pc,
        resource,
        send(text: string) {
          if (!done && dc.readyState === "open") dc.send(text);
        },
        close() {
          finish("closed", false);
        },
      };
    } catch (e) {
      finish("failed to open", false);
      throw e;
    }
  }
}

/** Turns the broker's base URL into its WebSocket endpoint: ws(s)://host/v1/ws. */
export function webSocketURL(baseURL: string): string {
  const u = new URL(baseURL);
  if (u.protocol === "http:") u.protocol = "ws:";
  else if (u.protocol === "https:") u.protocol = "wss:";
  if (u.pathname === "" || u.pathname === "/") u.pathname = "/v1/ws";
  return u.toString();
}

/** The WebSocket transport: /v1/ws, frames as text messages, audio as binary ones. */
export class WebSocketTransportFactory implements TransportFactory {
  constructor(private readonly url?: string) {}

  open(p: OpenParams, ev: TransportEvents): Promise<Transport> {
    const ws = new WebSocket(this.url ?? webSocketURL(p.baseURL));
    ws.binaryType = "arraybuffer";
    let done = false;
    return new Promise<Transport>((resolve, reject) => {
      const onAbort = () => {
        done = true;
        ws.close();
        reject(new BackchannelError("backchannel: aborted"));
      };
      p.signal.addEventListener("abort", onAbort, { once: true });
      ws.addEventListener("open", () => {
        p.signal.removeEventListener("abort", onAbort);
        resolve({
          kind: "websocket",
          send(text: string) {
            if (!done && ws.readyState === WebSocket.OPEN) ws.send(text);
          },
          sendAudio(chunk: Uint8Array) {
            if (!done && ws.readyState === WebSocket.OPEN) ws.send(chunk);
          },
          close() {
            done = true;
            ws.close(1000);
          },
        });
      }, { once: true });
      ws.addEventListener("message", (e: MessageEvent) => {
        if (done) return;
        if (typeof e.data === "string") ev.message(e.data);
        else ev.audio(new Uint8Array(e.data as ArrayBuffer));
      });
      ws.addEventListener("close", (e: CloseEvent) => {
        p.signal.removeEventListener("abort", onAbort);
        if (ws.readyState === WebSocket.CLOSED && !done) {
          done = true;
          const reason = `the WebSocket closed (${e.code}${e.reason ? " " + e.reason : ""})`;
          // Before open, this is a failed attempt; after, a drop.
          reject(new BackchannelError(`backchannel: cannot reach the broker at ${ws.url}: ${reason}`));
          ev.closed(reason);
        }
      });
    });
  }
}
