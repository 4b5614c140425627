// The attention-fa3 lab with attention sinks (its `sinks` case, gpt-oss-20b-like): attention_fa3_lab.cu built with FK_D 64
// and FK_SINKS 1, so the FA3 kernel and its mma.sync baseline both take the per-head sinks; a file of its own so that
// run.sh's build and tools/compile-cu.sh (CI) both compile this instance too.
#define FK_D 64
#define FK_SINKS 1
#include "attention_fa3_lab.cu"
