import { IncrementalDetokenizer, StopStringMatcher, type RequestOutput, type SamplingParams, type TextTokenizer, type TokenLogprob } from '@fastkernels/model-zoo';
import type { EngineLoop } from './engine-loop.js';
import type { ServerMetrics } from './metrics.js';

export type FinishReason = 'stop' | 'length';

/** One choice of a request (one engine request): its tokens, its text so far, and how it ended. */
export class Choice {
  readonly tokens: number[] = [];
  /** Every token's log-probabilities (when the request asked), and those not yet sent in a streamed chunk. */
  readonly logprobs: TokenLogprob[] = [];
  unsentLogprobs: TokenLogprob[] = [];
  /** Token ids not yet sent in a streamed chunk (their text may be held back). */
  unsentIds: number[] = [];
  text = '';
  finishReason: FinishReason | null = null;
  requestId = -1;
  first: number | null = null;
  last: number | null = null;
  readonly detok: IncrementalDetokenizer | null;
  readonly stopper: StopStringMatcher;

  constructor(
    readonly index: number,
    readonly promptIds: readonly number[],
    readonly params: Partial<SamplingParams>,
    tokenizer: TextTokenizer | null,
    stop: readonly string[],
  ) {
    this.detok = tokenizer ? new IncrementalDetokenizer(tokenizer) : null;
    this.stopper = new StopStringMatcher(stop);
  }
}

/** What the response writer does with a generation's progress. */
export interface GenerationListener {
  /** New text (possibly '') and token ids of one choice. */
  delta(c: Choice, text: string, ids: readonly number[]): void;
  /** A choice ended (finishReason set). */
  finished(c: Choice): void;
  /** Every choice ended. */
  done(): void;
  error(message: string): void;
}

/**
 * One HTTP request's generation: its choices as engine requests on the loop, their tokens turned into text
 * (incrementally, stop strings held back and cut), timings into the metrics. `cancel` drops what is still running
 * (a client that went away): its cache blocks are freed.
 */
export class Generation {
  private remaining: number;
  private settled = false;
  readonly arrival = performance.now();

  constructor(
    private readonly loop: EngineLoop,
    readonly choices: readonly Choice[],
    private readonly listener: GenerationListener,
    private readonly metrics: ServerMetrics,
  ) {
    this.remaining = choices.length;
  }

  get isDone(): boolean {
    return this.settled;
  }

  async start(): Promise<void> {
    const ids = await this.loop.add(this.choices.map((c) => ({
      promptIds: c.promptIds, params: c.params,
      sink: { onToken: (t: number) => this.onToken(c, t), onLogprob: (lp: TokenLogprob) => (c.logprobs.push(lp), c.unsentLogprobs.push(lp)), onFinish: (o: RequestOutput) => this.onFinish(c, o), onError: (m: string) => this.onError(m) },
    })));
    ids.forEach((id, i) => (this.choices[i]!.requestId = id));
  }

  cancel(): void {
    if (this.settled) return;
    this.settled = true;
    this.loop.cancel(this.choices.filter((c) => c.finishReason === null).map((c) => c.requestId));
    this.metrics.aborted.inc(this.metrics.labels);
  }

  private onToken(c: Choice, t: number): void {
    if (this.settled || c.finishReason) return;
    const now = performance.now();
    if (c.first === null) c.first = now;
    else if (c.last !== null) this.metrics.itl.observe(this.metrics.labels, (now - c.last) / 1000);
    c.last = now;
    c.tokens.push(t);
    this.metrics.generationTokens.inc(this.metrics.labels);
    const text = c.detok ? c.stopper.push(c.detok.push(t)) : '';
    c.text += text;
    this.listener.delta(c, text, [t]);
    if (c.stopper.stopped) {
      // a stop string: the engine request ends here (its blocks freed); the text stops before the string
      this.loop.cancel([c.requestId]);
      this.end(c, 'stop');
    }
  }

  private onFinish(c: Choice, o: RequestOutput): void {
    if (this.settled || c.finishReason) return;
    const tail = c.detok ? c.stopper.push(c.detok.flush()) + c.stopper.flush() : '';
    if (tail) {
      c.text += tail;
      this.listener.delta(c, tail, []);
    }
    this.end(c, o.finishReason === 'length' && !c.stopper.stopped ? 'length' : 'stop');
  }

  private end(c: Choice, reason: FinishReason): void {
    c.finishReason = reason;
    this.metrics.observeRequest({ arrival: this.arrival, first: c.first, end: performance.now(), promptTokens: c.promptIds.length, outputTokens: c.tokens.length, reason });
    this.listener.finished(c);
    if (--this.remaining === 0) {
      this.settled = true;
      this.listener.done();
    }
  }

  private onError(message: string): void {
    if (this.settled) return;
    this.settled = true;
    this.loop.cancel(this.choices.filter((c) => c.finishReason === null).map((c) => c.requestId));
    this.listener.error(message);
  }

  usage() {
    const prompts = new Map<readonly number[], number>();
    for (const c of this.choices) prompts.set(c.promptIds, c.promptIds.length);
    const prompt = [...prompts.values()].reduce((a, b) => a + b, 0);
    const completion = this.choices.reduce((a, c) => a + c.tokens.length, 0);
    return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
  }
}
