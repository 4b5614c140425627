/**
 * `fastkernels serve --tp 2` on 2 GPUs (tag gpu): rank 0 serves /v1/completions, every rank's engine follows its control
 * messages (packages/cli/src/serve-control.ts). Concurrent completion requests and one batched request, after an idle
 * spell, give generate --tp 1's greedy tokens (float32); SIGINT to the CLI stops every rank cleanly (exit 0). Runs the
 * bundle's CLI on the GPU host (`dist/gpu-host/run-gpu-tests serve-tp`), the repo's built CLI elsewhere. The same check
 * in the 2-GPU session suite: bench/run verify-tp (bench/suites/verify-tp/run.sh, step 3).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { startCli } from './helpers.js';
import { needGpus, tokenDiff, writeTinyTpModel } from './tp/gpu-fixture.js';

const G = { tags: ['gpu'], timeout: 600_000 };

let model: string;
let prompts: string;

beforeAll(() => {
  const dir = mkdtempSync(join(tmpdir(), 'fk-serve-tp-gpu-'));
  model = join(dir, 'model');
  writeTinyTpModel(model);
  prompts = join(dir, 'prompts.jsonl');
  writeFileSync(prompts, [[1, 2, 3, 4, 5], [9, 8, 7], [100, 200, 300, 400], [42]].map((p) => JSON.stringify({ prompt_ids: p })).join('\n') + '\n');
});

describe('serve --tp 2 on 2 GPUs', () => {
  it('concurrent completions equal generate --tp 1\'s greedy tokens; SIGINT stops every rank cleanly (exit 0)', G, async () => {
    needGpus(2);
    const list = [[1, 2, 3, 4, 5], [9, 8, 7], [100, 200, 300, 400], [42]];
    const gen = await startCli(['generate', '--model', model, '--prompt-file', prompts, '--max-tokens', '24', '--backend', 'cuda', '--dtype', 'f32', '--json'], { timeoutMs: 300_000 }).result;
    expect(gen.code, gen.stderr).toBe(0);
    const expected = (JSON.parse(gen.stdout) as { outputs: { token_ids: number[] }[] }).outputs.map((o) => o.token_ids);
    const srv = startCli(['serve', '--model', model, '--tp', '2', '--port', '0', '--backend', 'cuda', '--dtype', 'f32', '--max-model-len', '256', '--max-num-seqs', '8', '--num-kv-blocks', '64'], { timeoutMs: 400_000 });
    let stderr = '';
    let stopped = false;
    try {
      const port = await new Promise<number>((resolve) => {
        srv.child.stderr!.on('data', (d: Buffer) => {
          stderr += d.toString();
          const m = /serving \S+ on http:\/\/127\.0\.0\.1:(\d+)\//.exec(stderr);
          if (m) resolve(Number(m[1]));
        });
        void srv.result.then(() => resolve(0));
      });
      expect(port, stderr).toBeGreaterThan(0);
      expect(stderr).toMatch(/tensor parallel over 2 GPUs, rank 0 serves/);
      const url = `http://127.0.0.1:${port}/v1/completions`;
      type Completion = { choices: { token_ids: number[] }[] };
      const post = async (body: unknown) => (await (await fetch(url, { method: 'POST', body: JSON.stringify(body), signal: AbortSignal.timeout(120_000) })).json()) as Completion;
      // one request per prompt, all at once (they batch), then all prompts in one request, after an idle second
      const single = await Promise.all(list.map((p) => post({ prompt: p, max_tokens: 24, temperature: 0, ignore_eos: true })));
      // on a mismatch: where each request diverges, and the server's log (graph capture or its eager fallback)
      const tail = () => `\nserver log:\n${stderr.split('\n').slice(-25).join('\n')}`;
      const d1 = tokenDiff(expected, single.map((c) => c.choices[0]!.token_ids));
      expect(d1, d1 + tail()).toBe('');
      await new Promise((r) => setTimeout(r, 1000));
      const batched = await post({ prompt: list, max_tokens: 24, temperature: 0, ignore_eos: true });
      const d2 = tokenDiff(expected, batched.choices.map((c) => c.token_ids));
      expect(d2, d2 + tail()).toBe('');
      srv.child.kill('SIGINT');
      stopped = true;
      const r = await srv.result;
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toBe(''); // the server prints nothing on stdout
    } finally {
      // a failed check must not leave the ranks serving (the test process would wait on them until its deadline):
      // SIGINT (the launcher forwards it to every rank), SIGKILL after 20 s
      if (!stopped) {
        srv.child.kill('SIGINT');
        const killer = setTimeout(() => srv.child.kill('SIGKILL'), 20_000);
        await srv.result;
        clearTimeout(killer);
      }
    }
  });
});
