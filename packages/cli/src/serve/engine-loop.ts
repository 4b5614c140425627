import { errorMessage } from '@fastkernels/core';
import { DEFAULT_SAMPLING, type LLMEngine, type RequestOutput, type SamplingParams, type StepOutput, type TokenLogprob } from '@fastkernels/model-zoo';
import type { ControlOp } from '../serve-control.js';

/**
 * Under `serve --tp N` (rank 0): where each step's control message goes (serve-control.ts's ControlSender). Every
 * engine operation rank 0 makes (add, abort) is queued and sent, in order, before the next step.
 */
export interface ServerControl {
  send(m: { ops: readonly ControlOp[]; step: boolean; shutdown: boolean }): Promise<void>;
}

/** One engine request's listener: its tokens as they come, then its output (or the error that ended it). */
export interface RequestSink {
  onToken(token: number): void;
  /** The token's log-probabilities (requests with SamplingParams.logprobs), just before its onToken. */
  onLogprob?(lp: TokenLogprob): void;
  onFinish(out: RequestOutput): void;
  onError(message: string): void;
}

/**
 * Drives the engine for the HTTP layer: the engine steps on the event loop between I/O (setImmediate), so requests
 * arriving while others run join the running batch (continuous batching). Under --tp every add and abort is queued for
 * the other ranks and sent before the next step; an operation arriving while a control message is on its way waits
 * for that step (whenOpen), so it lands between the same two steps on every rank.
 */
export class EngineLoop {
  private readonly sinks = new Map<number, RequestSink>();
  private pumping = false;
  private ops: ControlOp[] = [];
  private gated = false;
  private readonly deferred: (() => void)[] = [];
  private busy: Promise<void> | null = null;
  private stopped = false;
  /** Set when the loop failed for good (--tp: a step threw, a rank went away). */
  fatal: string | null = null;
  /** The last step error (world 1: every request in flight got it; the engine goes on). */
  lastError: string | null = null;
  private idleWaiters: (() => void)[] = [];

  constructor(
    readonly engine: LLMEngine,
    private readonly control?: ServerControl,
    private readonly onFatal?: (e: Error) => void,
  ) {}

  /** Requests in flight (added, not finished or cancelled). */
  get inFlight(): number {
    return this.sinks.size;
  }

  private whenOpen(fn: () => void): void {
    if (this.gated) this.deferred.push(fn);
    else fn();
  }

  /**
   * Add requests, all or none (the engine validates each: a UserError for the client). Resolves with their ids once
   * added (under --tp possibly after the step in progress).
   */
  add(reqs: readonly { promptIds: readonly number[]; params: Partial<SamplingParams>; sink: RequestSink }[]): Promise<number[]> {
    return new Promise((ok, fail) =>
      this.whenOpen(() => {
        const ids: number[] = [];
        try {
          for (const r of reqs) {
            const rid = this.engine.addRequest(r.promptIds, r.params);
            ids.push(rid);
            if (this.control) this.ops.push({ kind: 'add', requestId: rid, promptIds: [...r.promptIds], params: { ...DEFAULT_SAMPLING, ...r.params } });
            this.sinks.set(rid, r.sink);
          }
        } catch (e) {
          for (const rid of ids) this.cancelNow(rid);
          fail(e);
          return;
        }
        this.schedule();
        ok(ids);
      }),
    );
  }

  /** Cancel requests (a client went away, a stop string matched): their blocks are freed, no output follows. */
  cancel(ids: readonly number[]): void {
    this.whenOpen(() => {
      for (const rid of ids) this.cancelNow(rid);
      this.notifyIdle();
    });
  }

  private cancelNow(rid: number): void {
    if (!this.sinks.delete(rid)) return; // finished already (or never added)
    this.engine.abortRequest(rid);
    if (this.control) this.ops.push({ kind: 'abort', requestId: rid });
  }

  /** Resolves when no request is in flight (SIGTERM's drain), or after timeoutMs. */
  whenIdle(timeoutMs: number): Promise<boolean> {
    if (!this.sinks.size) return Promise.resolve(true);
    return new Promise((ok) => {
      const t = setTimeout(() => ok(false), timeoutMs);
      this.idleWaiters.push(() => {
        clearTimeout(t);
        ok(true);
      });
    });
  }

  private notifyIdle(): void {
    if (this.sinks.size) return;
    for (const w of this.idleWaiters.splice(0)) w();
  }

  /** --tp: stop for good (a failed step, a lost rank): requests in flight get the error. */
  fail(e: Error): void {
    if (this.fatal) return;
    this.fatal = e.message;
    this.failAll(e.message);
    this.onFatal?.(e);
  }

  private failAll(message: string): void {
    const sinks = [...this.sinks.values()];
    this.sinks.clear();
    for (const s of sinks) s.onError(message);
    this.notifyIdle();
  }

  /**
   * Stop stepping; let the step in progress finish; under --tp send every rank the shutdown (with the operations still
   * queued), so all leave at the same point.
   */
  async shutdown(): Promise<void> {
    this.stopped = true;
    await this.busy;
    await new Promise((r) => setImmediate(r)); // dropped connections' cancellations
    if (!this.control || this.fatal) return;
    const ops = this.ops;
    this.ops = [];
    await this.control.send({ ops, step: false, shutdown: true });
  }

  private schedule(): void {
    if (this.pumping || this.busy || this.stopped || this.fatal) return;
    this.pumping = true;
    setImmediate(() => this.pump());
  }

  private pump(): void {
    this.pumping = false;
    if (!this.engine.hasUnfinished || this.stopped || this.fatal) return;
    if (this.control) {
      const busy = this.controlledStep(this.control);
      this.busy = busy;
      void busy.then(() => {
        this.busy = null;
        if (this.engine.hasUnfinished) this.schedule();
      });
      return;
    }
    this.stepAndDeliver();
  }

  /**
   * --tp: send the other ranks this step's message, and step once the bytes are out (never before: a rank that has not
   * read its message would leave this one waiting in a collective). A failed send or step ends the server.
   */
  private async controlledStep(control: ServerControl): Promise<void> {
    this.gated = true;
    try {
      const ops = this.ops;
      this.ops = [];
      try {
        await control.send({ ops, step: true, shutdown: false });
      } catch (e) {
        this.fail(e instanceof Error ? e : new Error(String(e)));
        return;
      }
      this.stepAndDeliver();
    } finally {
      this.gated = false;
      for (const fn of this.deferred.splice(0)) fn();
    }
  }

  private stepAndDeliver(): void {
    let out: StepOutput;
    try {
      out = this.engine.step();
    } catch (e) {
      this.lastError = errorMessage(e);
      if (this.control) {
        this.fail(new Error(`a step failed: ${this.lastError}`));
        return;
      }
      this.failAll(this.lastError);
      this.engine.abort();
      return;
    }
    for (const [rid, lp] of out.logprobs ?? []) this.sinks.get(rid)?.onLogprob?.(lp);
    for (const [rid, token] of out.tokens) this.sinks.get(rid)?.onToken(token);
    for (const f of out.finished) {
      const s = this.sinks.get(f.requestId);
      if (!s) continue;
      this.sinks.delete(f.requestId);
      s.onFinish(f);
    }
    this.notifyIdle();
    if (!this.control && this.engine.hasUnfinished) this.schedule();
  }
}
