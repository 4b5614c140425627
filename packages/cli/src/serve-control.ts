/**
 * `serve --tp N`'s control channel: HTTP requests reach rank 0 only, but every rank's LLMEngine must add the same
 * requests (and drop the same cancelled ones) between the same two steps, since the engine is SPMD (see LLMEngine).
 * Before each engine step, rank 0 sends every other rank one control message: the requests added and the requests
 * cancelled since the last message, in the order rank 0 applied them, and whether to step or to shut down. The other
 * ranks apply the operations to their engine in that order, then step (or leave), so every rank's scheduler sees the
 * same history and makes the same decisions; the request ids they assign are checked against rank 0's.
 *
 * Transport: a TCP connection on 127.0.0.1 from every rank > 0 to rank 0 (rank 0 listens on a free port and the ranks
 * learn it through the group: one tiny all-reduce of [port], TensorParallelGroup.agree; a hello carrying the launcher's
 * rendezvous token keeps stray local processes out). Idle handling: while no request is in flight rank 0 sends nothing
 * and the other ranks wait in a socket read, which has no deadline — no rank sits inside an NCCL collective while the
 * server is idle, so NCCL's timeout never fires on an idle server and no heartbeat is needed. A rank that dies closes
 * its socket: rank 0 then fails the server with a clear error (and the launcher stops every rank); rank 0 dying closes
 * the others' sockets and they exit with an error. Shutdown is a message too, so every rank leaves at the same point.
 *
 * Messages are int32 words (so the same encoding could travel in a collective broadcast), framed on the socket by a
 * u32 byte length. Floating-point sampling parameters travel as their float64 bits (two words), exactly.
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { DEFAULT_SAMPLING, type SamplingParams } from '@fastkernels/model-zoo';

export type ControlOp =
  | { readonly kind: 'add'; readonly requestId: number; readonly promptIds: readonly number[]; readonly params: SamplingParams }
  | { readonly kind: 'abort'; readonly requestId: number };

export interface ControlMessage {
  /** 0, 1, 2, ... in sending order (a gap or a repeat is a protocol error). */
  readonly seq: number;
  readonly ops: readonly ControlOp[];
  /** Run one engine step after applying the ops. */
  readonly step: boolean;
  /** Leave the serving loop after applying the ops. */
  readonly shutdown: boolean;
}

const MAGIC = 0x46_4b_53_43; // 'FKSC'
const HELLO = 0x46_4b_53_48; // 'FKSH'
const OP_ADD = 1;
const OP_ABORT = 2;
const F_STEP = 1;
const F_SHUTDOWN = 2;
const P_IGNORE_EOS = 1;
const P_STOP_IDS = 2;
/** One more word after the stop ids: SamplingParams.logprobs (every rank must take the same eager steps for it). */
const P_LOGPROBS = 4;
/** Largest frame accepted (words): 64 Mi words = 256 MiB. */
const MAX_WORDS = 64 << 20;

const f64 = new Float64Array(1);
const f64w = new Int32Array(f64.buffer);

function pushF64(out: number[], v: number): void {
  f64[0] = v;
  out.push(f64w[0]!, f64w[1]!);
}

function int32(v: number, what: string): number {
  if (!Number.isInteger(v) || v < -(2 ** 31) || v >= 2 ** 31) throw new RangeError(`control message: ${what} ${v} is not an int32`);
  return v;
}

/** The message as int32 words: [MAGIC, flags, seq, nOps, ops...]. */
export function encodeControl(m: ControlMessage): Int32Array {
  const w: number[] = [MAGIC, (m.step ? F_STEP : 0) | (m.shutdown ? F_SHUTDOWN : 0), int32(m.seq, 'seq'), m.ops.length];
  for (const op of m.ops) {
    if (op.kind === 'abort') {
      w.push(OP_ABORT, int32(op.requestId, 'request id'));
      continue;
    }
    const p = { ...DEFAULT_SAMPLING, ...op.params };
    w.push(OP_ADD, int32(op.requestId, 'request id'), op.promptIds.length);
    for (const id of op.promptIds) w.push(int32(id, 'token id'));
    for (const v of [p.temperature, p.topK, p.topP, p.maxTokens, p.seed]) pushF64(w, v);
    w.push((p.ignoreEos ? P_IGNORE_EOS : 0) | (p.stopTokenIds ? P_STOP_IDS : 0) | (p.logprobs !== undefined ? P_LOGPROBS : 0), p.stopTokenIds?.length ?? 0);
    for (const s of p.stopTokenIds ?? []) pushF64(w, s);
    if (p.logprobs !== undefined) w.push(int32(p.logprobs, 'logprobs'));
  }
  return Int32Array.from(w);
}

/** The inverse of encodeControl; throws on anything malformed (a wrong magic, a truncated or overlong message). */
export function decodeControl(words: Int32Array): ControlMessage {
  let i = 0;
  const take = (what: string): number => {
    if (i >= words.length) throw new Error(`control message truncated (reading ${what} at word ${i} of ${words.length})`);
    return words[i++]!;
  };
  const takeF64 = (what: string): number => {
    f64w[0] = take(what);
    f64w[1] = take(what);
    return f64[0]!;
  };
  if (take('magic') !== MAGIC) throw new Error('not a serve control message (bad magic)');
  const flags = take('flags');
  const seq = take('seq');
  const n = take('op count');
  if (n < 0) throw new Error(`control message: op count ${n}`);
  const ops: ControlOp[] = [];
  for (let k = 0; k < n; k++) {
    const kind = take('op');
    const requestId = take('request id');
    if (kind === OP_ABORT) {
      ops.push({ kind: 'abort', requestId });
      continue;
    }
    if (kind !== OP_ADD) throw new Error(`control message: unknown op ${kind}`);
    const len = take('prompt length');
    if (len < 0 || i + len > words.length) throw new Error(`control message truncated (prompt of ${len} tokens)`);
    const promptIds = Array.from(words.subarray(i, i + len));
    i += len;
    const [temperature, topK, topP, maxTokens, seed] = ['temperature', 'topK', 'topP', 'maxTokens', 'seed'].map(takeF64) as [number, number, number, number, number];
    const pflags = take('param flags');
    const nStop = take('stop id count');
    if (nStop < 0) throw new Error(`control message: stop id count ${nStop}`);
    const stops: number[] = [];
    for (let s = 0; s < nStop; s++) stops.push(takeF64('stop id'));
    const params: SamplingParams = {
      temperature, topK, topP, maxTokens, seed,
      ...(pflags & P_IGNORE_EOS ? { ignoreEos: true } : {}),
      ...(pflags & P_STOP_IDS ? { stopTokenIds: stops } : {}),
      ...(pflags & P_LOGPROBS ? { logprobs: take('logprobs') } : {}),
    };
    ops.push({ kind: 'add', requestId, promptIds, params });
  }
  if (i !== words.length) throw new Error(`control message: ${words.length - i} words past its end`);
  return { seq, ops, step: (flags & F_STEP) !== 0, shutdown: (flags & F_SHUTDOWN) !== 0 };
}

/** What the other ranks' engines must do with a control message (LLMEngine's methods; tests may fake it). */
export interface ControlledEngine {
  addRequest(promptIds: readonly number[], params: Partial<SamplingParams>): number;
  abortRequest(requestId: number): boolean;
  step(): unknown;
}

/**
 * Apply one message to an engine (a rank > 0): the ops in order (each add must get rank 0's request id: the engines'
 * histories are the same), then one step when asked. Returns whether the rank must leave (shutdown).
 */
export function applyControl(engine: ControlledEngine, m: ControlMessage): boolean {
  for (const op of m.ops) {
    if (op.kind === 'abort') {
      engine.abortRequest(op.requestId);
      continue;
    }
    const id = engine.addRequest(op.promptIds, op.params);
    if (id !== op.requestId) throw new Error(`serve --tp: this rank gave request id ${id} where rank 0 gave ${op.requestId}: the ranks' engines diverged`);
  }
  if (m.shutdown) return true;
  if (m.step) engine.step();
  return false;
}

// -------------------------------------------------------------------------------------------------------- transport

function frame(words: Int32Array): Buffer {
  const b = Buffer.alloc(4 + words.byteLength);
  b.writeUInt32LE(words.byteLength, 0);
  Buffer.from(words.buffer, words.byteOffset, words.byteLength).copy(b, 4);
  return b;
}

/** Calls `onFrame` with each whole frame's words as they arrive on `sock`. */
function readFrames(sock: Socket, onFrame: (words: Int32Array) => void, onBad: (why: string) => void): void {
  let buf: Buffer = Buffer.alloc(0);
  sock.on('data', (chunk: Buffer) => {
    buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
    while (buf.length >= 4) {
      const n = buf.readUInt32LE(0);
      if (n % 4 !== 0 || n / 4 > MAX_WORDS) return onBad(`bad frame length ${n}`);
      if (buf.length < 4 + n) return;
      const words = new Int32Array(n / 4);
      Buffer.from(words.buffer).set(buf.subarray(4, 4 + n));
      buf = buf.subarray(4 + n);
      onFrame(words);
    }
  });
}

function helloWords(rank: number, token: string): Int32Array {
  return Int32Array.from([HELLO, rank, token.length, ...Array.from(token, (c) => c.charCodeAt(0))]);
}

export interface ControlChannelOptions {
  readonly rank: number;
  readonly world: number;
  /** Shared by every rank (the launcher's FASTKERNELS_RDZV_TOKEN): a hello without it is refused. */
  readonly token: string;
  /**
   * Tell every rank rank 0's port: called on every rank at the same point with rank 0's port on rank 0 and 0 elsewhere;
   * returns rank 0's port (production: the group's max all-reduce).
   */
  readonly exchangePort: (port: number) => number | Promise<number>;
  /** How long rank 0 waits for the others to connect (default 120 s). */
  readonly connectTimeoutMs?: number;
}

/** Rank 0's end: one socket per other rank. */
export class ControlSender {
  private seq = 0;
  private closing = false;
  private lost: string | null = null;
  /** Called once when a rank's socket closes before shutdown (the rank died). */
  onPeerLost: (why: string) => void = () => {};

  constructor(private readonly peers: ReadonlyMap<number, Socket>) {
    for (const [rank, sock] of peers) {
      sock.on('close', () => this.peerGone(`tensor-parallel rank ${rank} closed the serve control channel (it stopped or died)`));
      sock.on('error', (e) => this.peerGone(`tensor-parallel rank ${rank}: serve control channel: ${e.message}`));
    }
  }

  /** The reason a peer went away, once one has. */
  get peerLost(): string | null {
    return this.lost;
  }

  private peerGone(why: string): void {
    if (this.closing || this.lost) return;
    this.lost = why;
    this.onPeerLost(why);
  }

  /**
   * Send one message to every rank. Resolves once the bytes are in the kernel for every socket (usually at once), so
   * the caller may then block in a collective without the message waiting on this process's event loop.
   */
  async send(m: { ops: readonly ControlOp[]; step: boolean; shutdown: boolean }): Promise<void> {
    if (this.lost) throw new Error(this.lost);
    const data = frame(encodeControl({ ...m, seq: this.seq++ }));
    if (m.shutdown) this.closing = true;
    const waits: Promise<void>[] = [];
    for (const sock of this.peers.values()) {
      sock.write(data);
      if (sock.writableLength > 0) {
        waits.push(new Promise<void>((ok, fail) => {
          sock.once('drain', ok);
          sock.once('close', () => fail(new Error(this.lost ?? 'a rank closed the serve control channel')));
        }));
      }
    }
    await Promise.all(waits);
  }

  close(): void {
    this.closing = true;
    for (const s of this.peers.values()) s.end();
  }
}

/** The end of a rank > 0: messages in order. */
export class ControlReceiver {
  private readonly queue: ControlMessage[] = [];
  private waiter: { ok: (m: ControlMessage) => void; fail: (e: Error) => void } | null = null;
  private failure: Error | null = null;
  private expect = 0;
  private done = false;

  constructor(private readonly sock: Socket) {
    readFrames(sock, (w) => {
      let m: ControlMessage;
      try {
        m = decodeControl(w);
        if (m.seq !== this.expect) throw new Error(`control message ${m.seq} where ${this.expect} was expected`);
      } catch (e) {
        return this.fail(new Error(`serve --tp: ${(e as Error).message}`));
      }
      this.expect++;
      if (m.shutdown) this.done = true;
      if (this.waiter) {
        const w = this.waiter;
        this.waiter = null;
        w.ok(m);
      } else this.queue.push(m);
    }, (why) => this.fail(new Error(`serve --tp: control channel: ${why}`)));
    sock.on('close', () => {
      if (!this.done) this.fail(new Error('serve --tp: rank 0 closed the control channel without a shutdown (it stopped or died)'));
    });
    sock.on('error', (e) => this.fail(new Error(`serve --tp: control channel: ${e.message}`)));
  }

  private fail(e: Error): void {
    if (this.failure) return;
    this.failure = e;
    this.sock.destroy();
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      w.fail(e);
    }
  }

  /** The next message (waits in a socket read: no deadline, so an idle server keeps its ranks waiting here). */
  next(): Promise<ControlMessage> {
    const m = this.queue.shift();
    if (m) return Promise.resolve(m);
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((ok, fail) => (this.waiter = { ok, fail }));
  }

  close(): void {
    this.done = true;
    this.sock.end();
  }
}

/**
 * Open the channel: rank 0 listens on 127.0.0.1 (a free port), the port goes to every rank through `exchangePort`,
 * every other rank connects and says hello. Every rank must call it at the same point (exchangePort is a collective).
 */
export async function openControlChannel(o: ControlChannelOptions & { rank: 0 }): Promise<ControlSender>;
export async function openControlChannel(o: ControlChannelOptions): Promise<ControlSender | ControlReceiver>;
export async function openControlChannel(o: ControlChannelOptions): Promise<ControlSender | ControlReceiver> {
  if (o.rank === 0) {
    const peers = new Map<number, Socket>();
    let server: Server | undefined;
    let done!: () => void;
    let failed!: (e: Error) => void;
    const all = new Promise<void>((ok, fail) => ((done = ok), (failed = fail)));
    if (o.world === 1) done();
    server = createServer((sock) => {
      sock.on('error', () => {});
      let hello = true;
      readFrames(sock, (w) => {
        if (!hello) return;
        hello = false;
        const rank = w[1]!;
        const token = String.fromCharCode(...w.subarray(3, 3 + Math.max(0, w[2]!)));
        if (w[0] !== HELLO || token !== o.token || !Number.isInteger(rank) || rank < 1 || rank >= o.world || peers.has(rank)) {
          sock.destroy();
          return;
        }
        sock.removeAllListeners('data');
        peers.set(rank, sock);
        if (peers.size === o.world - 1) done();
      }, () => sock.destroy());
    });
    const port = await new Promise<number>((ok, fail) => {
      server!.once('error', fail);
      server!.listen(0, '127.0.0.1', () => ok((server!.address() as { port: number }).port));
    });
    const timer = setTimeout(() => failed(new Error(`serve --tp: ${o.world - 1 - peers.size} rank(s) did not join the control channel within ${((o.connectTimeoutMs ?? 120_000) / 1000).toFixed(0)} s`)), o.connectTimeoutMs ?? 120_000);
    try {
      await o.exchangePort(port);
      await all;
    } finally {
      clearTimeout(timer);
      server.close(); // the accepted sockets stay open
      server = undefined;
    }
    for (const s of peers.values()) s.setNoDelay(true);
    return new ControlSender(peers);
  }
  const port = await o.exchangePort(0);
  if (!Number.isInteger(port) || port <= 0 || port > 65535) throw new Error(`serve --tp: rank 0's control port is ${port}`);
  const sock = await new Promise<Socket>((ok, fail) => {
    const s = createConnection({ host: '127.0.0.1', port }, () => ok(s));
    s.once('error', fail);
  });
  sock.setNoDelay(true);
  const receiver = new ControlReceiver(sock);
  sock.write(frame(helloWords(o.rank, o.token)));
  return receiver;
}

/** A rank > 0 of `serve --tp`: apply rank 0's messages until the shutdown (rejects when the channel breaks or a step fails). */
export async function followControl(engine: ControlledEngine, receiver: ControlReceiver, onMessage?: (m: ControlMessage) => void): Promise<void> {
  for (;;) {
    const m = await receiver.next();
    onMessage?.(m);
    if (applyControl(engine, m)) return;
  }
}
