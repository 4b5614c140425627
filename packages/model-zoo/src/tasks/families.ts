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

type FamilyKey = keyof typeof FAMILIES;

/** The family of each of the original's 47 architectures (its registry's L4 module stems). */
const ARCHITECTURE_FAMILY: Readonly<Record<string, FamilyKey>> = {
  ...Object.fromEntries(['llama', 'deepseek', 'glm', 'mixtral', 'bitnet', 'gpt_oss', 'llama_eagle3', 'gemma4', 'qwen2', 'mistral'].map((a) => [a, 'llm'])),
  ...Object.fromEntries(['mamba', 'mamba2', 'rwkv7', 'gla', 'retnet', 'qwen3_next', 'kimi_linear', 'ttt_e2e', 'jamba'].map((a) => [a, 'linearAttn'])),
  ...Object.fromEntries(['flux', 'hunyuan_video', 'sdxl', 'sam3', 'whisper', 'cosyvoice3'].map((a) => [a, 'vision'])),
  ...Object.fromEntries(['qwen2_vl', 'qwen3_vl', 'qwen2_5_omni', 'siglip2', 'dinov3', 'swinv2'].map((a) => [a, 'multimodal'])),
  ...Object.fromEntries(['mobilenetv4', 'convnextv2', 'efficientnetv2', 'yolov10', 'rtdetrv2'].map((a) => [a, 'edge'])),
  ...Object.fromEntries(['gaussian_splatting', 'instant_ngp', 'pointtransformerv3', 'openfold3', 'pi0', 'dp3'].map((a) => [a, 'robotics'])),
  ...Object.fromEntries(['dlrmv2', 'lightgcn', 'bge_m3', 'colbertv2', 'llada'].map((a) => [a, 'recsys'])),
  ...Object.fromEntries(['oasis', 'vjepa2'].map((a) => [a, 'worldModels'])),
} as Record<string, FamilyKey>;

/** The families whose architectures use a task, in the leaderboard's order; an unknown architecture is an error. */
export function familiesOf(architectures: readonly string[]): string[] {
  const keys = new Set<FamilyKey>();
  for (const a of architectures) {
    const k = ARCHITECTURE_FAMILY[a];
    if (!k) throw new Error(`unknown architecture '${a}': add it to ARCHITECTURE_FAMILY (tasks/families.ts) with its family`);
    keys.add(k);
  }
  return (Object.keys(FAMILIES) as FamilyKey[]).filter((k) => keys.has(k)).map((k) => FAMILIES[k]);
}
