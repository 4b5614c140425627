/**
 * An error caused by the user's input (a file, a flag, a candidate). The CLI prints its
 * message without a stack trace and exits with code 2.
 */
export class UserError extends Error {
  override readonly name = 'UserError';
  constructor(
    message: string,
    readonly details: { file?: string; field?: string; fix?: string } = {},
  ) {
    super(message);
  }

  /** One paragraph: what is wrong, where, and how to fix it. */
  describe(): string {
    const where = [this.details.file, this.details.field].filter(Boolean).join(': ');
    const lines = [where ? `${where}: ${this.message}` : this.message];
    if (this.details.fix) lines.push(`fix: ${this.details.fix}`);
    return lines.join('\n');
  }
}

export function errorMessage(e: unknown): string {
  if (e instanceof UserError) return e.describe();
  if (e instanceof Error) return e.message;
  return String(e);
}
