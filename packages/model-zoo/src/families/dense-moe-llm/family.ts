/** The family name as the original's leaderboard spells it. */
export { DENSE_MOE_LLM as FAMILY } from '../../tasks/families.js';
