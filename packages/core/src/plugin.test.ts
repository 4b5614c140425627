import { describe, expect, it } from 'vitest';
import { container, BACKEND, TASK_PROVIDER, UserError, definePlugin, errorMessage, loadPlugins, resolveAllOrNone, worstStatus, type Backend, type DependencyContainer } from './index.js';
import { HostTestBackend } from './test-support/host-backend.js';

const backendPlugin = (name: string, backend: Backend) =>
  definePlugin({
    name,
    version: '1.0.0',
    register(c: DependencyContainer) {
      c.register(BACKEND, { useValue: backend });
    },
  });

describe('definePlugin', () => {
  it('accepts lowercase names joined by dashes', () => {
    for (const name of ['cpu', 'backend-cuda', 'dense-moe-llm', 'a1', 'x-2y']) {
      expect(definePlugin({ name, version: '0', register() {} }).name).toBe(name);
    }
  });

  it('rejects other names with a message naming the plugin', () => {
    for (const name of ['', 'Cuda', 'backend_cuda', '1cpu', '-cpu', 'cpu.cuda', 'cpu cuda']) {
      expect(() => definePlugin({ name, version: '0', register() {} }), name).toThrow(`plugin name '${name}' must be lowercase words joined by '-'`);
    }
  });

  it('returns a frozen copy', () => {
    const src = { name: 'p', version: '1', register() {} };
    const p = definePlugin(src);
    expect(Object.isFrozen(p)).toBe(true);
    expect(p).not.toBe(src);
    expect(p.register).toBe(src.register);
  });
});

describe('loadPlugins', () => {
  it('registers into a child container, leaving the parent untouched', () => {
    const a = new HostTestBackend('a');
    const b = new HostTestBackend('b');
    const child = container.createChildContainer();
    const out = loadPlugins(child, [backendPlugin('be-a', a), backendPlugin('be-b', b)]);
    expect(out).toBe(child);
    expect(resolveAllOrNone(child, BACKEND)).toEqual([a, b]);
    expect(resolveAllOrNone(container, BACKEND)).toEqual([]);
    // siblings do not see each other's registrations
    const sibling = container.createChildContainer();
    expect(resolveAllOrNone(sibling, BACKEND)).toEqual([]);
    // a grandchild sees what its parent registered
    expect(resolveAllOrNone(child.createChildContainer(), BACKEND)).toEqual([a, b]);
  });

  it('runs register in order', () => {
    const order: string[] = [];
    const mk = (name: string) => definePlugin({ name, version: '1', register: () => void order.push(name) });
    loadPlugins(container.createChildContainer(), [mk('one'), mk('two'), mk('three')]);
    expect(order).toEqual(['one', 'two', 'three']);
  });

  it('a plugin loaded twice fails', () => {
    const p = backendPlugin('dup', new HostTestBackend());
    expect(() => loadPlugins(container.createChildContainer(), [p, p])).toThrow("plugin 'dup' loaded twice");
  });

  it('resolveAllOrNone returns [] for nothing registered and all registrations otherwise', () => {
    const c = container.createChildContainer();
    expect(resolveAllOrNone(c, TASK_PROVIDER)).toEqual([]);
    const provider = { family: 'toy', tasks: () => [] };
    c.register(TASK_PROVIDER, { useValue: provider });
    expect(resolveAllOrNone(c, TASK_PROVIDER)).toEqual([provider]);
  });
});

describe('errors and statuses', () => {
  it('UserError.describe and errorMessage', () => {
    const e = new UserError('bad dtype', { file: 'cases.json', field: 'cases.0.dtype', fix: 'use bf16' });
    expect(e.name).toBe('UserError');
    expect(e).toBeInstanceOf(Error);
    expect(e.describe()).toBe('cases.json: cases.0.dtype: bad dtype\nfix: use bf16');
    expect(new UserError('plain').describe()).toBe('plain');
    expect(new UserError('m', { field: 'f' }).describe()).toBe('f: m');
    expect(errorMessage(e)).toBe(e.describe());
    expect(errorMessage(new Error('x'))).toBe('x');
    expect(errorMessage('str')).toBe('str');
    expect(errorMessage(42)).toBe('42');
  });

  it('worstStatus folds by severity', () => {
    expect(worstStatus([])).toBe('PASSED');
    expect(worstStatus(['PASSED', 'SKIPPED'])).toBe('SKIPPED');
    expect(worstStatus(['INCORRECT_SHAPE', 'INCORRECT_NUMERICAL'])).toBe('INCORRECT_SHAPE');
    expect(worstStatus(['INCORRECT_NUMERICAL', 'RUNTIME_ERROR', 'INCORRECT_DTYPE'])).toBe('RUNTIME_ERROR');
    expect(worstStatus(new Set(['TIMEOUT', 'REWARD_HACK'] as const))).toBe('REWARD_HACK');
  });
});
