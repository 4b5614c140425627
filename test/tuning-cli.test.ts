/**
 * `fastkernels tuning show|derive` and the settings in `doctor`, run as a user would: a derived override file fed back
 * through FASTKERNELS_TUNING changes exactly the keys it names, and bad files are exit-2 errors naming the file and key.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { STACK, cli, tempSet } from './helpers.js';

describe('fastkernels tuning', () => {
  it('show --device picks the device file; derive --out writes an override that show then reports as the source', () => {
    const h200 = cli(['tuning', 'show', '--device', 'NVIDIA H200', '--json']);
    expect(h200.code, h200.stderr).toBe(0);
    const base = JSON.parse(h200.stdout);
    expect(base).toMatchObject({ device: 'NVIDIA H200', deviceFile: 'h200.json', overrideFile: null });
    expect(base.tuning.linear.gemvMaxRows).toBe(1);

    const file = join(tempSet(), 'ab.json');
    const d = cli(['tuning', 'derive', '--set', 'linear.gemvMaxRows=0', '--set', 'linear.gemvLateTrigger=glu', '--set', 'engine.chainDecode=false', '--out', file]);
    expect(d.code, d.stderr).toBe(0);
    expect(d.stdout.trim()).toBe(file);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ linear: { gemvMaxRows: 0, gemvLateTrigger: 'glu' }, engine: { chainDecode: false } });

    const ab = cli(['tuning', 'show', '--device', 'NVIDIA H200', '--json'], { env: { FASTKERNELS_TUNING: file } });
    expect(ab.code, ab.stderr).toBe(0);
    const t = JSON.parse(ab.stdout);
    expect(t.tuning.linear).toMatchObject({ gemvMaxRows: 0, gemvLateTrigger: 'glu', gemvUnroll: base.tuning.linear.gemvUnroll });
    expect(t.sources['linear.gemvMaxRows']).toBe(file);
    expect(t.sources['linear.gemvUnroll']).toBe('tuning/h200.json');
  });

  it('the H100 (unmeasured) gets generic.json; the table names where each value came from', () => {
    const r = cli(['tuning', 'show', '--device', 'NVIDIA H100 80GB HBM3']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/-> tuning\/generic\.json/);
    expect(r.stdout).toMatch(/linear\.gemvMaxRows\s+1\s+tuning\/generic\.json/);
  });

  it('derive without a key it knows, or a value the key does not take: exit 2 naming the key', () => {
    const typo = cli(['tuning', 'derive', '--set', 'linear.gemvMaxRow=0']);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toMatch(/--set: linear\.gemvMaxRow: tuning override: unknown key/);
    const bad = cli(['tuning', 'derive', '--set', 'attention.decodeCombineUnroll=17']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/attention\.decodeCombineUnroll/);
    expect(bad.stderr).not.toMatch(STACK);
  });

  it('a FASTKERNELS_TUNING file that is missing or has an unknown key: exit 2 naming the file and the key', () => {
    const dir = tempSet();
    const missing = cli(['tuning', 'show'], { env: { FASTKERNELS_TUNING: join(dir, 'none.json') } });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/FASTKERNELS_TUNING names a file that does not exist/);
    const file = join(dir, 'typo.json');
    writeFileSync(file, JSON.stringify({ sampler: { unhinted: 'multi', greedySplit: 0 } }));
    const typo = cli(['tuning', 'show'], { env: { FASTKERNELS_TUNING: file } });
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain(`${file}: sampler.greedySplit: tuning override: unknown key`);
    expect(typo.stderr).not.toMatch(STACK);
  });
});

describe('fastkernels doctor: settings', () => {
  it('--json lists every setting with its value and source; internal ones are marked; unknown FASTKERNELS_* are named', () => {
    const r = cli(['doctor', '--json'], { env: { FASTKERNELS_NCCL_TIMEOUT_MS: '60000', FASTKERNELS_NOT_A_SETTING: '1' } });
    expect(r.code, r.stderr).toBe(0);
    const j = JSON.parse(r.stdout);
    const byName = Object.fromEntries(j.settings.map((x: { name: string }) => [x.name, x]));
    expect(byName.FASTKERNELS_NCCL_TIMEOUT_MS).toMatchObject({ value: '60000', source: 'environment' });
    expect(byName.FASTKERNELS_TRITON_TIMEOUT_MS).toMatchObject({ value: '300000', source: 'default' });
    expect(byName.FASTKERNELS_RDZV_TOKEN.internal).toBe(true);
    expect(j.unknownVariables).toContain('FASTKERNELS_NOT_A_SETTING');
    expect(j.tuning.file).toMatch(/^tuning\/.+\.json$/);
  });

  it('the table hides internal settings unless --all', () => {
    const r = cli(['doctor']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/FASTKERNELS_CACHE_DIR\s/);
    expect(r.stdout).not.toMatch(/FASTKERNELS_RDZV_TOKEN/);
    expect(cli(['doctor', '--all']).stdout).toMatch(/FASTKERNELS_RDZV_TOKEN\s.*\(internal\)/);
  });
});
