/**
 * Progress on stderr, never stdout (so `--json` output stays clean). On a TTY one line is
 * redrawn in place; with --progress on a pipe each new phase gets its own line; otherwise silent.
 */
export interface ProgressOptions {
  readonly stream?: NodeJS.WriteStream;
  /** --progress: force it on even when stderr is not a TTY. */
  readonly force?: boolean;
  /** Never show anything (a bench rank other than 0). */
  readonly off?: boolean;
}

export class Progress {
  private readonly stream: NodeJS.WriteStream;
  private readonly tty: boolean;
  readonly enabled: boolean;
  private lastKey = '';
  private lastDraw = 0;
  private drawn = false;

  constructor(options: ProgressOptions = {}) {
    this.stream = options.stream ?? process.stderr;
    this.tty = Boolean(this.stream.isTTY);
    this.enabled = !options.off && (this.tty || Boolean(options.force));
  }

  /** Show a status. `key` identifies the phase: on a pipe, a line is written only when it changes. */
  update(text: string, key = text): void {
    if (!this.enabled) return;
    if (this.tty) {
      const now = Date.now();
      if (key === this.lastKey && now - this.lastDraw < 80) return;
      this.lastKey = key;
      this.lastDraw = now;
      const width = Math.max(20, (this.stream.columns || 100) - 1);
      this.stream.write(`\r\x1b[2K${text.length > width ? text.slice(0, width - 1) + '…' : text}`);
      this.drawn = true;
    } else if (key !== this.lastKey) {
      this.lastKey = key;
      this.stream.write(`${text}\n`);
    }
  }

  /** Clear the line (TTY) before other output is printed. */
  clear(): void {
    if (this.tty && this.drawn) {
      this.stream.write('\r\x1b[2K');
      this.drawn = false;
      this.lastKey = '';
    }
  }
}
