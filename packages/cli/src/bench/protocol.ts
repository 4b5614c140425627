import { createHmac, timingSafeEqual } from 'node:crypto';
import { SignedSchema, WorkerBodySchema, type WorkerBody } from '@fastkernels/core';

/**
 * Worker messages are signed (HMAC-SHA256 with a per-worker secret the parent sends in `init`, held in a
 * closure before any candidate loads) and numbered; an unsigned, mis-signed, malformed or out-of-order
 * message while a task runs means candidate code spoke on the channel: that task is REWARD_HACK. The
 * worker's stdout is never read for results.
 */

export function sign(secret: string, body: string): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

/** Validate a message from a worker: the signature, then the body's schema. */
export function openMessage(secret: string, raw: unknown): { ok: true; body: WorkerBody } | { ok: false; why: string } {
  const s = SignedSchema.safeParse(raw);
  if (!s.success) return { ok: false, why: `an unsigned message on the result channel: ${JSON.stringify(raw).slice(0, 160)}` };
  const want = Buffer.from(sign(secret, s.data.body), 'hex');
  if (!timingSafeEqual(want, Buffer.from(s.data.sig, 'hex'))) return { ok: false, why: 'a message with a forged signature on the result channel' };
  let json: unknown;
  try {
    json = JSON.parse(s.data.body);
  } catch {
    return { ok: false, why: 'a signed message that is not JSON' };
  }
  const b = WorkerBodySchema.safeParse(json);
  if (!b.success) return { ok: false, why: `a malformed message: ${b.error.issues[0]?.path.join('.')}: ${b.error.issues[0]?.message}` };
  return { ok: true, body: b.data };
}
