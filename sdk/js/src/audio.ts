// Audio for the WebSocket transport (SPEC 17): binary messages carry G.711 µ-law, 8 kHz, mono,
// 20 ms (160 bytes) per message, both ways. Over WebRTC the browser does all of this itself.

/** Samples per second of the wire audio. */
export const SAMPLE_RATE = 8000;
/** Samples (and µ-law bytes) in one 20 ms message. */
export const SAMPLES_PER_CHUNK = 160;

const BIAS = 0x84;
const CLIP = 32635;

/** Converts one 16-bit linear sample to µ-law (as internal/g711.Encode). */
export function ulawEncode(sample: number): number {
  let s = Math.max(-32768, Math.min(32767, Math.round(sample)));
  let sign = 0;
  if (s < 0) {
    s = -s;
    sign = 0x80;
  }
  if (s > CLIP) s = CLIP;
  s += BIAS;
  let exponent = 7;
  for (let mask = 0x4000; (s & mask) === 0 && exponent > 0; mask >>= 1) exponent--;
  const mantissa = (s >> (exponent + 3)) & 0x0f;
  return ~(sign | (exponent << 4) | mantissa) & 0xff;
}

const decodeTable = (() => {
  const t = new Int16Array(256);
  for (let i = 0; i < 256; i++) {
    const u = ~i & 0xff;
    const sign = u & 0x80;
    const exponent = (u >> 4) & 0x07;
    const mantissa = u & 0x0f;
    let s = ((mantissa << 3) + BIAS) << exponent;
    s -= BIAS;
    t[i] = sign ? -s : s;
  }
  return t;
})();

/** Converts one µ-law byte to a 16-bit linear sample (as internal/g711.Decode). */
export function ulawDecode(b: number): number {
  return decodeTable[b & 0xff]!;
}

/** Plays the agent's µ-law chunks through Web Audio, back to back. */
export class ChunkPlayer {
  private ctx: AudioContext | null = null;
  private next = 0;

  /** Queues one chunk of µ-law audio. */
  play(chunk: Uint8Array): void {
    if (typeof AudioContext === "undefined") return;
    if (!this.ctx) this.ctx = new AudioContext();
    const ctx = this.ctx;
    if (ctx.state === "suspended") void ctx.resume().catch(() => {});
    const buf = ctx.createBuffer(1, chunk.length, SAMPLE_RATE);
    const data = buf.getChannelData(0);
    for (let i = 0; i < chunk.length; i++) data[i] = ulawDecode(chunk[i]!) / 32768;
    const src = ctx.createBufferSource();
    src.buffer = buf;
    src.connect(ctx.destination);
    // A gap of more than 100 ms means a new talk spurt: start it now, not in the past.
    const at = Math.max(this.next, ctx.currentTime + 0.02);
    src.start(at);
    this.next = at + buf.duration;
  }

  /** Releases the audio context. */
  close(): void {
    void this.ctx?.close().catch(() => {});
    this.ctx = null;
  }
}

// The worklet that hands the microphone's samples to the page, 128 frames at a time.
const workletSource = `
class BackchannelTap extends AudioWorkletProcessor {
  process(inputs) {
    const ch = inputs[0] && inputs[0][0];
    if (ch) this.port.postMessage(ch.slice(0));
    return true;
  }
}
registerProcessor("backchannel-tap", BackchannelTap);
`;

/**
 * Turns a microphone track into 20 ms µ-law chunks at 8 kHz for the WebSocket transport:
 * Web Audio at the device rate, averaged down to 8 kHz, encoded, 160 bytes per chunk.
 */
export class MicEncoder {
  private ctx: AudioContext | null = null;
  private node: AudioWorkletNode | null = null;
  private source: MediaStreamAudioSourceNode | null = null;
  // The chunk being filled (handed over to onChunk when full, then replaced) and its fill.
  private chunk = new Uint8Array(SAMPLES_PER_CHUNK);
  private filled = 0;
  private acc = 0;
  private accN = 0;
  private phase = 0;

  constructor(private readonly track: MediaStreamTrack, private readonly onChunk: (chunk: Uint8Array) => void) {}

  /** Starts capturing. */
  async start(): Promise<void> {
    const ctx = new AudioContext();
    this.ctx = ctx;
    const url = URL.createObjectURL(new Blob([workletSource], { type: "text/javascript" }));
    try {
      await ctx.audioWorklet.addModule(url);
    } finally {
      URL.revokeObjectURL(url);
    }
    this.source = ctx.createMediaStreamSource(new MediaStream([this.track]));
    this.node = new AudioWorkletNode(ctx, "backchannel-tap");
    const step = SAMPLE_RATE / ctx.sampleRate; // output samples per input sample (< 1)
    this.node.port.onmessage = (e: MessageEvent<Float32Array>) => {
      if (!this.track.enabled) return;
      for (const v of e.data) {
        this.acc += v;
        this.accN++;
        this.phase += step;
        if (this.phase >= 1) {
          this.phase -= 1;
          this.chunk[this.filled++] = ulawEncode((this.acc / this.accN) * 32767);
          this.acc = 0;
          this.accN = 0;
          if (this.filled === SAMPLES_PER_CHUNK) {
            this.onChunk(this.chunk);
            this.chunk = new Uint8Array(SAMPLES_PER_CHUNK);
            this.filled = 0;
          }
        }
      }
    };
    this.source.connect(this.node);
  }

  /** Stops capturing (the track itself stays live: it belongs to the application). */
  stop(): void {
    this.source?.disconnect();
    this.node?.disconnect();
    void this.ctx?.close().catch(() => {});
    this.ctx = null;
  }
}
