/**
 * `fastkernels serve` as a process (the built CLI on the CPU backend): SIGTERM lets the request in flight finish while
 * new requests get 503, then the process exits 0. Loopback only; the server is killed if a check fails.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, startCli } from './helpers.js';

const MODEL = join(ROOT, 'packages/model-zoo/fixtures/tiny-llama-chat');

describe('serve: SIGTERM drains', () => {
  it('the streamed request in flight completes, a new one gets 503, the process exits 0', async () => {
    const srv = startCli(['serve', '--model', MODEL, '--backend', 'cpu', '--dtype', 'f32', '--port', '0', '--max-model-len', '256', '--num-kv-blocks', '32'], { timeoutMs: 60_000 });
    let stderr = '';
    try {
      const port = await new Promise<number>((ok) => {
        srv.child.stderr!.on('data', (d: Buffer) => {
          stderr += d.toString();
          const m = /serving \S+ on http:\/\/127\.0\.0\.1:(\d+)\//.exec(stderr);
          if (m) ok(Number(m[1]));
        });
        void srv.result.then(() => ok(0));
      });
      expect(port, stderr).toBeGreaterThan(0);
      const base = `http://127.0.0.1:${port}`;
      const r = await fetch(`${base}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'Hi', max_tokens: 200, temperature: 0, ignore_eos: true, stream: true }), signal: AbortSignal.timeout(30_000) });
      const reader = r.body!.getReader();
      await reader.read(); // the first chunk: the request is running
      srv.child.kill('SIGTERM');
      await new Promise((ok) => setTimeout(ok, 50));
      const late = await fetch(`${base}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: [1, 2], max_tokens: 2 }), signal: AbortSignal.timeout(10_000) }).catch(() => null);
      // 503 while draining (or refused, if the drain already ended and the port closed)
      if (late) expect(late.status).toBe(503);
      let rest = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        rest += new TextDecoder().decode(value);
      }
      expect(rest).toMatch(/"finish_reason":"length"/);
      expect(rest.trimEnd().endsWith('data: [DONE]')).toBe(true);
      const res = await srv.result;
      expect(res.code, res.stderr).toBe(0);
      expect(res.stderr).toMatch(/SIGTERM: draining \(1 requests in flight/);
    } finally {
      srv.child.kill('SIGKILL');
    }
  }, 90_000);
});
