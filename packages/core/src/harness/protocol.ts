import { z } from 'zod';
import { TaskCaseSchema } from '../task.js';
import { MachineProfileSchema } from './floor.js';
import { CaseResultSchema, RunEnvironmentSchema } from './report.js';

/**
 * The bench parent <-> worker protocol (the CLI runs each GPU's worker as a child process). Every
 * message is validated with these schemas on arrival; the CLI signs worker messages (HMAC) so candidate
 * code in the worker cannot forge results.
 */

export const WorkerOptionsSchema = z.object({
  rounds: z.number().int().positive(),
  iters: z.number().int().nonnegative(),
  warmup: z.number().int().nonnegative(),
  warmupMs: z.number().nonnegative(),
  seed: z.number().int(),
  flushBytes: z.number().int().nonnegative().nullable(),
  inputSets: z.number().int().positive(),
  hiddenShape: z.boolean(),
});
export type WorkerOptions = z.infer<typeof WorkerOptionsSchema>;

export const CaptureValuesSchema = z.record(z.string(), z.object({ file: z.string(), tensor: z.string() }));

export const ParentMessageSchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('init'),
    secret: z.string().min(32),
    backend: z.string(),
    device: z.number().int().nonnegative(),
    physicalDevice: z.number().int().nonnegative(),
    candidates: z.string().nullable(),
    preflight: z.array(z.string()),
    options: WorkerOptionsSchema,
    profile: MachineProfileSchema.optional(),
  }),
  z.object({
    type: z.literal('task'),
    taskId: z.string(),
    cases: z.array(TaskCaseSchema.extend({ values: CaptureValuesSchema.optional() })),
  }),
  z.object({ type: z.literal('shutdown') }),
]);
export type ParentMessage = z.infer<typeof ParentMessageSchema>;
export type TaskMessage = Extract<ParentMessage, { type: 'task' }>;

export const PreflightFailureSchema = z.object({
  taskId: z.string(),
  file: z.string(),
  message: z.string(),
  fix: z.string().optional(),
  hack: z.boolean(),
});
export type PreflightFailure = z.infer<typeof PreflightFailureSchema>;

export const WorkerBodySchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('ready'),
    seq: z.number().int(),
    env: RunEnvironmentSchema,
    profile: MachineProfileSchema,
    failures: z.array(PreflightFailureSchema),
    dirty: z.boolean(),
  }),
  z.object({
    type: z.literal('progress'),
    seq: z.number().int(),
    task: z.string(),
    case: z.string(),
    caseIndex: z.number().int(),
    caseCount: z.number().int(),
    phase: z.string(),
    done: z.number(),
    total: z.number(),
  }),
  z.object({ type: z.literal('case'), seq: z.number().int(), taskId: z.string(), result: CaseResultSchema }),
  z.object({ type: z.literal('done'), seq: z.number().int(), taskId: z.string(), dirty: z.boolean(), dirtyReason: z.string().optional() }),
  z.object({ type: z.literal('fatal'), seq: z.number().int(), message: z.string(), usage: z.boolean() }),
]);
export type WorkerBody = z.infer<typeof WorkerBodySchema>;

export const SignedSchema = z.object({ body: z.string(), sig: z.string().regex(/^[0-9a-f]{64}$/) });

