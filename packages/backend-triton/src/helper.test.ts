// The real compile helper (python/fk_triton_compile.py, embedded) over the real client, against a fake `triton`.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { HelperClient } from './client.js';
import { TritonCompileError, TritonUnavailableError } from './errors.js';
import { HELPER_SOURCE } from './helper-source.generated.js';
import { buildLaunchPlan } from './metadata.js';
import { ADD_SOURCE, addRequest, fakeHelperCommand, fakeToolchain, HAS_PYTHON, PYTHON } from './test-util.js';

const toolchains: { close(): Promise<void> }[] = [];
const track = <T extends { close(): Promise<void> }>(t: T): T => (toolchains.push(t), t);
afterAll(async () => {
  await Promise.all(toolchains.map((t) => t.close()));
});

describe('the embedded helper', () => {
  it('is up to date with python/fk_triton_compile.py', async () => {
    // @ts-expect-error: a plain .mjs script without types
    const { renderHelperSource } = (await import('../scripts/embed-helper.mjs')) as { renderHelperSource: () => string };
    expect(readFileSync(new URL('./helper-source.generated.ts', import.meta.url), 'utf8')).toBe(renderHelperSource());
    expect(HELPER_SOURCE).toContain('PROTOCOL = 1');
  });

  it.skipIf(!HAS_PYTHON)('extracts the .param list of the PTX entry', () => {
    const code = `import sys; sys.path.insert(0, ${JSON.stringify(new URL('../python', import.meta.url).pathname)})
import json, fk_triton_compile as h
ptx = ".visible .entry k(\\n\\t.param .u64 .ptr .global .align 1 k_param_0,\\n\\t.param .u32 k_param_1\\n)\\n.reqntid 128, 1, 1\\n{\\n}\\n"
print(json.dumps(h.extract_ptx_params(ptx, "k")))`;
    const r = spawnSync(PYTHON, ['-c', code], { encoding: 'utf8', env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual(['.param .u64 .ptr .global .align 1 k_param_0', '.param .u32 k_param_1']);
  });
});

describe.skipIf(!HAS_PYTHON)('helper protocol (real helper, fake triton)', () => {
  it('answers hello with the Python and the Triton version, and keeps stdout clean of Triton prints', async () => {
    const c = track(new HelperClient(fakeHelperCommand()));
    const hello = c.requestSync({ op: 'hello' });
    expect(hello.ok).toBe(true);
    expect(hello.result).toMatchObject({ protocol: 1, triton: '3.6.0+fake' });
    // fake triton prints to stdout (Python-level and raw fd 1) during compile: the answer still parses.
    const r = await c.request({ op: 'compile', ...addRequest() });
    expect(r.ok).toBe(true);
    expect(r.result?.ptx_params).toHaveLength(6);
  });

  it('compiles through the toolchain: metadata, constexpr defaults, and the kernel parameter list', () => {
    const tc = track(fakeToolchain());
    const out = tc.compileSync(addRequest());
    expect(out.compiled.name).toBe('add_kernel');
    expect(out.compiled.constexprs).toEqual({ BLOCK_SIZE: 1024 }); // the Python default
    expect(out.compiled.shared).toBe(3072);
    const plan = buildLaunchPlan(out.compiled);
    expect(plan.params.map((p) => p.role)).toEqual(['arg', 'arg', 'arg', 'arg', 'global_scratch', 'profile_scratch']);
    const explicit = tc.compileSync(addRequest(ADD_SOURCE, 'add_kernel', { constexprs: { BLOCK_SIZE: 256 } }));
    expect(explicit.compiled.constexprs).toEqual({ BLOCK_SIZE: 256 });
  });

  it('serves sync and async requests interleaved, in order', async () => {
    const tc = track(fakeToolchain());
    const a = tc.compileAsync(addRequest());
    const b = tc.compileSync(addRequest(ADD_SOURCE, 'add_kernel', { options: { num_warps: 8, num_stages: 2 } }));
    const c = tc.compileAsync(addRequest(ADD_SOURCE, 'add_kernel', { options: { num_warps: 2, num_stages: 1 } }));
    expect(b.compiled.numWarps).toBe(8);
    expect((await a).compiled.numWarps).toBe(4);
    expect((await c).compiled.numWarps).toBe(2);
  });

  it('maps a Triton CompilationError to the line of the submitted source', () => {
    const tc = track(fakeToolchain());
    const source = ADD_SOURCE.replace('x + y', 'x + undefined_y');
    let err: unknown;
    try {
      tc.compileSync(addRequest(source));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(TritonCompileError);
    const e = err as TritonCompileError;
    expect(e.kind).toBe('compile');
    expect(e.line).toBe(12);
    expect(e.column).toBe(34);
    expect(e.message).toContain('Triton failed to compile add_kernel (add.py): NameError');
    expect(e.message).toContain('at add.py:12:34 (in add_kernel)');
    expect(e.message).toContain('> 12 |     tl.store(out_ptr + offs, x + undefined_y, mask=mask)');
  });

  it('follows an error into a called @triton.jit function, with the call site', () => {
    const tc = track(fakeToolchain());
    const source = `import triton
import triton.language as tl


@triton.jit
def helper(v):
    return v * undefined_scale


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr = 1024):
    offs = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, helper(x))
`;
    let err: TritonCompileError | undefined;
    try {
      tc.compileSync(addRequest(source));
    } catch (e) {
      err = e as TritonCompileError;
    }
    expect(err?.line).toBe(7);
    expect(err?.message).toContain('at add.py:7:16 (in helper)');
    expect(err?.message).toContain('called from add.py:14:30 (in add_kernel): tl.store(out_ptr + offs, helper(x))');
  });

  it('reports a Python error in the source with its line', () => {
    const tc = track(fakeToolchain());
    const source = ADD_SOURCE.replace('    mask = offs < n_elements', '    mask = offs < n_elements)');
    let err: TritonCompileError | undefined;
    try {
      tc.compileSync(addRequest(source));
    } catch (e) {
      err = e as TritonCompileError;
    }
    expect(err?.kind).toBe('source');
    expect(err?.line).toBe(9);
    expect(err?.message).toMatch(/Python failed to run the source of add_kernel \(add.py\): SyntaxError/);
  });

  it('rejects bad requests with the reason', () => {
    const tc = track(fakeToolchain());
    expect(() => tc.compileSync(addRequest(ADD_SOURCE, 'nope'))).toThrow(/defines no 'nope' \(its @triton.jit functions: add_kernel\)/);
    const noDefault = ADD_SOURCE.replace(' = 1024', '');
    expect(() => tc.compileSync(addRequest(noDefault))).toThrow(/constexpr parameter 'BLOCK_SIZE' of add_kernel has no value/);
    expect(() => tc.compileSync(addRequest(ADD_SOURCE, 'add_kernel', { options: { num_warps: 32, num_stages: 3 } }))).toThrow(
      /Triton ran out of resources compiling add_kernel \(add.py\): out of resource: shared memory/,
    );
  });

  it('says what to install when the Python has no triton', () => {
    const tc = track(fakeToolchain({ withTriton: false }));
    expect(() => tc.compileSync(addRequest())).toThrow(TritonUnavailableError);
    expect(() => tc.compileSync(addRequest())).toThrow(/`import triton` failed in .*No module named 'triton'.*Install Triton for that Python, or set FASTKERNELS_PYTHON/);
  });

  it('kills a helper that does not answer in time and starts a fresh one for the next request', () => {
    const tc = track(fakeToolchain({ timeoutMs: 1500 }));
    const slow = ADD_SOURCE.replaceAll('add_kernel', 'slow_kernel');
    const t0 = Date.now();
    expect(() => tc.compileSync(addRequest(slow, 'slow_kernel'))).toThrow(/did not answer within 1500 ms and was killed/);
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(tc.compileSync(addRequest()).compiled.name).toBe('add_kernel');
  });

  it('reports a helper that dies, then recovers', async () => {
    const tc = track(fakeToolchain());
    const crash = ADD_SOURCE.replaceAll('add_kernel', 'crash_kernel');
    await expect(tc.compileAsync(addRequest(crash, 'crash_kernel'))).rejects.toThrow(/stopped \(exit status 3\) before answering/);
    expect((await tc.compileAsync(addRequest())).compiled.name).toBe('add_kernel');
  });

  it('shuts down gracefully and can be used again after', async () => {
    const c = new HelperClient(fakeHelperCommand());
    expect(c.requestSync({ op: 'hello' }).ok).toBe(true);
    expect(c.running).toBe(true);
    await c.close();
    expect(c.running).toBe(false);
    expect((await c.request({ op: 'hello' })).ok).toBe(true);
    await c.close();
  });

  it('reports a command that cannot be started', () => {
    const c = track(new HelperClient({ command: '/nonexistent/python3', args: [] }));
    const r = c.requestSync({ op: 'hello' });
    expect(r.ok).toBe(false);
    expect(r.error?.message).toMatch(/could not run the Triton helper with \/nonexistent\/python3: .*ENOENT/);
  });
});
