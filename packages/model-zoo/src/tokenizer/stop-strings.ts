/**
 * Stop strings over streamed text (OpenAI's `stop`): text is released only once it cannot be the start of a stop
 * string, so a client never sees part of a stop sequence; on a match the text before it is released and the request
 * ends (the stop string itself is not returned, as in OpenAI's API and vLLM's default).
 */
export class StopStringMatcher {
  private held = '';
  private readonly longest: number;
  stopped = false;

  constructor(private readonly stops: readonly string[]) {
    this.longest = Math.max(0, ...stops.map((s) => s.length));
  }

  /** Feed new text; returns the text safe to emit now. After a match `stopped` is true and later input is ignored. */
  push(delta: string): string {
    if (this.stopped) return '';
    if (!this.stops.length) return delta;
    const text = this.held + delta;
    let cut = -1;
    for (const s of this.stops) {
      const i = text.indexOf(s);
      if (i >= 0 && (cut < 0 || i < cut)) cut = i;
    }
    if (cut >= 0) {
      this.stopped = true;
      this.held = '';
      return text.slice(0, cut);
    }
    // keep the longest tail that is a proper prefix of some stop string
    let keep = 0;
    for (let k = Math.min(this.longest - 1, text.length); k > 0; k--) {
      const tail = text.slice(text.length - k);
      if (this.stops.some((s) => s.startsWith(tail))) {
        keep = k;
        break;
      }
    }
    this.held = text.slice(text.length - keep);
    return text.slice(0, text.length - keep);
  }

  /** At the end of generation: the held-back text (it never completed a stop string). */
  flush(): string {
    const t = this.stopped ? '' : this.held;
    this.held = '';
    return t;
  }
}
