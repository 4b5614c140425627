/** Outcome of evaluating one case of a task. */
export const STATUSES = ['PASSED', 'INCORRECT_NUMERICAL', 'INCORRECT_SHAPE', 'INCORRECT_DTYPE', 'RUNTIME_ERROR', 'TIMEOUT', 'REWARD_HACK', 'SKIPPED'] as const;
export type Status = (typeof STATUSES)[number];

/** Worse statuses win when folding several outcomes into one (order of severity). */
const SEVERITY: Record<Status, number> = {
  PASSED: 0, SKIPPED: 1, INCORRECT_NUMERICAL: 2, INCORRECT_DTYPE: 3, INCORRECT_SHAPE: 4, RUNTIME_ERROR: 5, TIMEOUT: 6, REWARD_HACK: 7,
};

export function worstStatus(statuses: Iterable<Status>): Status {
  let worst: Status = 'PASSED';
  for (const s of statuses) if (SEVERITY[s] > SEVERITY[worst]) worst = s;
  return worst;
}

/** A status's rank in the order of severity (PASSED 0 … REWARD_HACK 7), e.g. to fold statuses across processes. */
export function statusSeverity(s: Status): number {
  return SEVERITY[s];
}

/** The status of a severity rank (the inverse of statusSeverity). */
export function statusOfSeverity(n: number): Status {
  const s = (Object.keys(SEVERITY) as Status[]).find((k) => SEVERITY[k] === n);
  if (!s) throw new RangeError(`no status has severity ${n}`);
  return s;
}
