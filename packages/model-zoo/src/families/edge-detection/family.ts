import { FAMILIES } from '../../tasks/families.js';

/** The family name as the original's leaderboard spells it. */
export const FAMILY = FAMILIES.edge;
