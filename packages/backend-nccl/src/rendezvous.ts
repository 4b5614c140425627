/**
 * The launcher's rendezvous: a tiny TCP server in the parent (127.0.0.1 only) that hands every rank
 * { rank, world, id } once all ranks have arrived. Rank 0 brings the 128-byte NCCL id (the process that calls
 * ncclGetUniqueId hosts NCCL's bootstrap root, so it must be a rank, not the launcher, which has no GPU work).
 *
 * Protocol: one JSON line each way.
 *   rank -> server  {"type":"hello","rank":r,"token":t,"pid":p,"id":"<base64, rank 0 only>"}
 *   server -> rank  {"type":"welcome","rank":r,"world":w,"id":"<base64>"}  or  {"type":"error","message":"..."}
 * The token (FASTKERNELS_RDZV_TOKEN) keeps stray local processes out.
 */
import { randomBytes } from 'node:crypto';
import { createConnection, createServer, type Server, type Socket } from 'node:net';

export const RENDEZVOUS_HOST = '127.0.0.1';
export const ID_BYTES = 128;

export interface RendezvousInfo {
  readonly rank: number;
  readonly world: number;
  /** The shared 128-byte id (identical on every rank). */
  readonly id: Uint8Array;
}

interface Hello {
  type: 'hello';
  rank: number;
  token: string;
  pid?: number;
  id?: string;
}

export function newToken(): string {
  return randomBytes(16).toString('hex');
}

/** Read one newline-terminated JSON message from a socket (at most 64 KiB). */
function readLine(sock: Socket, onLine: (msg: unknown) => void, onBad: (why: string) => void): void {
  let buf = '';
  sock.setEncoding('utf8');
  sock.on('data', (chunk: string) => {
    buf += chunk;
    if (buf.length > 65536) return onBad('message too long');
    const nl = buf.indexOf('\n');
    if (nl < 0) return;
    const line = buf.slice(0, nl);
    buf = buf.slice(nl + 1);
    try {
      onLine(JSON.parse(line));
    } catch {
      onBad('malformed message');
    }
  });
}

export interface RendezvousServerOptions {
  readonly world: number;
  readonly token: string;
  /** 0 (default) picks a free port. */
  readonly port?: number;
  /** Called once every rank has received its welcome. */
  readonly onComplete?: (info: { id: Uint8Array; pids: number[] }) => void;
  /** Called when the first rank arrives (the launcher starts its rendezvous deadline then). */
  readonly onFirstHello?: () => void;
  /** Protocol problems (bad token, duplicate rank): logged, the connection is refused. */
  readonly onReject?: (why: string) => void;
}

/** The parent side. start() listens on 127.0.0.1; close() stops it. */
export class RendezvousServer {
  private server: Server | undefined;
  private readonly waiting = new Map<number, { sock: Socket; pid?: number }>();
  private id: Uint8Array | undefined;
  private done = false;
  port = 0;

  constructor(private readonly opts: RendezvousServerOptions) {
    if (!Number.isInteger(opts.world) || opts.world < 1) throw new RangeError(`rendezvous: world ${opts.world}`);
  }

  /** Ranks that have said hello so far. */
  get arrived(): number[] {
    return [...this.waiting.keys()].sort((a, b) => a - b);
  }

  get complete(): boolean {
    return this.done;
  }

  async start(): Promise<number> {
    const server = createServer((sock) => this.accept(sock));
    this.server = server;
    await new Promise<void>((res, rej) => {
      server.once('error', rej);
      server.listen(this.opts.port ?? 0, RENDEZVOUS_HOST, () => {
        server.off('error', rej);
        res();
      });
    });
    const addr = server.address();
    this.port = typeof addr === 'object' && addr ? addr.port : 0;
    return this.port;
  }

  close(): void {
    for (const { sock } of this.waiting.values()) sock.destroy();
    this.server?.close();
    this.server = undefined;
  }

  private accept(sock: Socket): void {
    sock.on('error', () => {});
    const reject = (why: string) => {
      this.opts.onReject?.(why);
      sock.end(JSON.stringify({ type: 'error', message: why }) + '\n');
    };
    readLine(
      sock,
      (msg) => {
        const h = msg as Hello;
        if (!h || h.type !== 'hello') return reject('expected a hello');
        if (h.token !== this.opts.token) return reject('bad rendezvous token');
        if (this.done) return reject('the rendezvous is already complete');
        if (!Number.isInteger(h.rank) || h.rank < 0 || h.rank >= this.opts.world) return reject(`rank ${h.rank} is not in [0, ${this.opts.world})`);
        if (this.waiting.has(h.rank)) return reject(`rank ${h.rank} joined twice`);
        if (h.rank === 0) {
          const id = typeof h.id === 'string' ? Buffer.from(h.id, 'base64') : undefined;
          if (!id || id.byteLength !== ID_BYTES) return reject(`rank 0 must bring a ${ID_BYTES}-byte id`);
          this.id = new Uint8Array(id);
        }
        if (this.waiting.size === 0) this.opts.onFirstHello?.();
        this.waiting.set(h.rank, { sock, pid: h.pid });
        sock.on('close', () => {
          if (!this.done && this.waiting.get(h.rank)?.sock === sock) this.waiting.delete(h.rank);
        });
        this.maybeComplete();
      },
      reject,
    );
  }

  private maybeComplete(): void {
    if (this.done || !this.id || this.waiting.size !== this.opts.world) return;
    this.done = true;
    const id = Buffer.from(this.id).toString('base64');
    for (const [rank, { sock }] of this.waiting) sock.end(JSON.stringify({ type: 'welcome', rank, world: this.opts.world, id }) + '\n');
    this.opts.onComplete?.({ id: this.id, pids: [...this.waiting.values()].map((w) => w.pid ?? 0) });
  }
}

export interface RendezvousClientOptions {
  readonly port: number;
  readonly rank: number;
  readonly token: string;
  /** Rank 0 only: makes the shared id (NCCL's ncclGetUniqueId in production). */
  readonly makeId?: () => Uint8Array;
  /** Give up after this long (default 300 s). */
  readonly timeoutMs?: number;
}

/** The rank side: connect (retrying while the port refuses), say hello, wait for the welcome. */
export async function rendezvous(opts: RendezvousClientOptions): Promise<RendezvousInfo> {
  const deadline = Date.now() + (opts.timeoutMs ?? 300_000);
  let id: string | undefined;
  if (opts.rank === 0) {
    if (!opts.makeId) throw new Error('rendezvous: rank 0 must make the shared id (makeId)');
    const bytes = opts.makeId();
    if (bytes.byteLength !== ID_BYTES) throw new RangeError(`rendezvous: the id must be ${ID_BYTES} bytes (got ${bytes.byteLength})`);
    id = Buffer.from(bytes).toString('base64');
  }
  const hello = JSON.stringify({ type: 'hello', rank: opts.rank, token: opts.token, pid: process.pid, id }) + '\n';
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`rendezvous: rank ${opts.rank} got no answer from ${RENDEZVOUS_HOST}:${opts.port} in time (are all ranks running?)`);
    const r = await attempt(opts.port, hello, left);
    if (r.kind === 'welcome') return r.info;
    if (r.kind === 'error') throw new Error(`rendezvous: the launcher refused rank ${opts.rank}: ${r.message}`);
    await new Promise((res) => setTimeout(res, 50)); // connection refused or dropped: the server may not be up yet
  }
}

type Attempt = { kind: 'welcome'; info: RendezvousInfo } | { kind: 'error'; message: string } | { kind: 'retry' };

function attempt(port: number, hello: string, timeoutMs: number): Promise<Attempt> {
  return new Promise((resolve) => {
    let settled = false;
    const finish = (a: Attempt) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      resolve(a);
    };
    const sock = createConnection({ host: RENDEZVOUS_HOST, port }, () => sock.write(hello));
    const timer = setTimeout(() => finish({ kind: 'error', message: `no welcome within ${Math.round(timeoutMs / 1000)} s (a rank never joined)` }), timeoutMs);
    sock.on('error', () => finish({ kind: 'retry' }));
    sock.on('close', () => finish({ kind: 'retry' }));
    readLine(
      sock,
      (msg) => {
        const m = msg as { type?: string; rank?: number; world?: number; id?: string; message?: string };
        if (m.type === 'welcome' && typeof m.id === 'string' && Number.isInteger(m.rank) && Number.isInteger(m.world)) {
          finish({ kind: 'welcome', info: { rank: m.rank!, world: m.world!, id: new Uint8Array(Buffer.from(m.id, 'base64')) } });
        } else {
          finish({ kind: 'error', message: m.message ?? 'unexpected answer' });
        }
      },
      (why) => finish({ kind: 'error', message: why }),
    );
  });
}
