/**
 * The catalog's families as the original's leaderboard spells them (reference/fastkernels.md §2). A shared task lists
 * every family whose models use it; family folders re-export their own name from here.
 */
export const FAMILIES = {
  llm: 'Dense & MoE LLMs',
  linearAttn: 'Linear Attention & New Archs',
  vision: 'Vision / Video / Audio',
  multimodal: 'Multimodal & Encoders',
  edge: 'Edge & Detection',
  robotics: '3D / Robotics / Science',
  recsys: 'Recommendation & Specialized',
  worldModels: 'World Models',
} as const;

export const DENSE_MOE_LLM = FAMILIES.llm;
