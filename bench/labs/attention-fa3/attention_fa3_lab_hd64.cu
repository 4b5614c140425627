// The attention-fa3 lab at head dim 64 (its hd64-* cases): attention_fa3_lab.cu built with FK_D 64, a file of its own so
// that run.sh's build and tools/compile-cu.sh (CI) both compile this instance too.
#define FK_D 64
#include "attention_fa3_lab.cu"
