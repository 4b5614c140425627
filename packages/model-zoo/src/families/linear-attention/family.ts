import { FAMILIES } from '../../tasks/families.js';

/** The family name as the original's leaderboard spells it (GLA, later Qwen3-Next and Kimi-Linear). */
export const FAMILY = FAMILIES.linearAttn;
