import { spawnSync } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const G = { tags: ['gpu'] };

/**
 * Runs in a child process (a sticky error destroys the context for the whole process). `m` is the
 * package's module namespace. Prints one JSON line.
 */
const child = async (m: Record<string, any>) => {
  const rt = m.CudaRuntime.get();
  const k = m.cudaKernel({ source: m.KERNEL_SOURCES['runtime.cu'], entry: 'fk_poke' });
  k.compile();
  const report: Record<string, unknown> = {};
  try {
    k.launch(1, 1, 0, [0x10, 1]); // write to an unmapped address
    rt.synchronize();
    report.first = 'no error';
  } catch (e: any) {
    report.first = { name: e.name, fatal: e instanceof m.CudaFatalError, code: e.code, message: e.message };
  }
  try {
    rt.allocate(1024);
    rt.synchronize();
    report.after = 'no error';
  } catch (e: any) {
    report.after = { name: e.name, fatal: e instanceof m.CudaFatalError, message: e.message };
  }
  report.lost = !!rt.lost;
  console.log(JSON.stringify(report));
};

/** The module the child imports: the bundle itself (on the GPU host) or the built package (under vitest). */
function childModuleUrl(): { url: string; exportName?: string } {
  const self = import.meta.url;
  if (self.endsWith('.mjs')) return { url: self, exportName: 'fk' };
  return { url: pathToFileURL(fileURLToPath(new URL('../dist/index.js', self))).href };
}

describe('sticky errors', () => {
  it('an illegal address raises CudaFatalError saying the context is lost (in a child process)', G, () => {
    const { url, exportName } = childModuleUrl();
    const script = `const mod = await import(${JSON.stringify(url)}); await (${child.toString()})(${exportName ? `mod.${exportName}` : 'mod'});`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', env: { ...process.env, FK_GPU_TEST_CHILD: '1' }, timeout: 120_000 });
    const line = (r.stdout ?? '').trim().split('\n').filter((l) => l.startsWith('{')).pop();
    if (!line) throw new Error(`child produced no report (status ${r.status}):\n${r.stdout}\n${r.stderr}`);
    const rep = JSON.parse(line);
    expect(rep.first.name).toBe('CudaFatalError');
    expect(rep.first.fatal).toBe(true);
    expect(rep.first.code).toBe(700);
    expect(rep.first.message).toMatch(/CUDA_ERROR_ILLEGAL_ADDRESS.*context is lost/);
    expect(rep.after.fatal).toBe(true);
    expect(rep.lost).toBe(true);
  });
});
