/** The family name as the original's leaderboard spells it. */
export const FAMILY = 'Dense & MoE LLMs';
