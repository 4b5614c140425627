import { currentContext, hasContext, withContext, type ExecutionContext } from './context.js';
import type { Module, ModuleClass } from './module.js';
import type { TaskDefinition } from './task.js';

/**
 * Task id -> module class. A child registry overrides some classes and falls back to its
 * parent for the rest: a candidate set is a child of the baseline registry, so every module
 * built from it uses the candidate wherever the baseline would have been used.
 */
export class ModuleRegistry {
  private readonly classes = new Map<string, ModuleClass>();
  private readonly tasks = new Map<string, TaskDefinition>();
  /** Ids of plain modules (the torch.nn-like layers: `nn.Linear`), registered without task metadata. */
  private readonly modules = new Set<string>();

  constructor(readonly parent?: ModuleRegistry, readonly label = parent ? 'child' : 'baseline') {}

  /** Register a task with its baseline class (root registries). */
  registerTask(task: TaskDefinition): void {
    if (this.tasks.has(task.id)) throw new Error(`task '${task.id}' registered twice`);
    this.tasks.set(task.id, task);
    this.classes.set(task.id, task.baseline);
  }

  /**
   * Register a module that is not a task (a layer such as `nn.Linear`) under an id, so module trees build it through
   * the registry and a child registry can override it like a task.
   */
  registerModule(id: string, cls: ModuleClass): void {
    if (this.tasks.has(id) || this.modules.has(id)) throw new Error(`module '${id}' registered twice`);
    this.modules.add(id);
    this.classes.set(id, cls);
  }

  /** Whether a task or module id resolves here or in a parent. */
  has(id: string): boolean {
    return this.classes.has(id) || (this.parent?.has(id) ?? false);
  }

  /** Whether the id is a plain module (registerModule), here or in a parent. */
  private isModuleId(id: string): boolean {
    return this.modules.has(id) || (this.parent?.isModuleId(id) ?? false);
  }

  /** Override one task's (or registered module's) class in this registry. */
  override(taskId: string, cls: ModuleClass): void {
    if (!this.task(taskId) && !this.isModuleId(taskId)) throw new Error(`cannot override unknown task '${taskId}'`);
    this.classes.set(taskId, cls);
  }

  child(label = 'child'): ModuleRegistry {
    return new ModuleRegistry(this, label);
  }

  task(taskId: string): TaskDefinition | undefined {
    return this.tasks.get(taskId) ?? this.parent?.task(taskId);
  }

  allTasks(): TaskDefinition[] {
    const seen = new Map<string, TaskDefinition>();
    for (let r: ModuleRegistry | undefined = this; r; r = r.parent) for (const [k, t] of r.tasks) if (!seen.has(k)) seen.set(k, t);
    return [...seen.values()].sort((a, b) => a.level - b.level || a.id.localeCompare(b.id));
  }

  resolve(taskId: string): ModuleClass {
    const cls = this.classes.get(taskId) ?? this.parent?.resolve(taskId);
    if (!cls) throw new Error(`unknown task '${taskId}'`);
    return cls;
  }

  /** Task ids overridden in this registry (not its parents). */
  overrides(): string[] {
    return [...this.classes.keys()].filter((k) => !this.tasks.has(k) && !this.modules.has(k));
  }

  isOverridden(taskId: string): boolean {
    return this.classes.has(taskId) && !this.tasks.has(taskId) && !this.modules.has(taskId);
  }

  /**
   * Construct a module. Called by modules on their current context, which already names
   * this registry; `createIn` sets up the context from outside. When the current context names
   * another registry, the module is built with this one swapped in, so its own children resolve
   * here too (late binding holds whichever registry the construction starts from).
   */
  create<M extends Module = Module>(taskId: string, ...args: unknown[]): M {
    const Cls = this.resolve(taskId);
    if (hasContext()) {
      const ctx = currentContext();
      if (ctx.registry !== this) return withContext({ ...ctx, registry: this }, () => new Cls(...args) as M);
    }
    return new Cls(...args) as M;
  }

  /** Construct a module with ctx (whose registry should be this one) as the current context. */
  createIn<M extends Module = Module>(ctx: ExecutionContext, taskId: string, ...args: unknown[]): M {
    return withContext(ctx, () => this.create<M>(taskId, ...args));
  }
}
