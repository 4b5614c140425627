// cuDNN for the conv ops, dlopen'ed on first use (nothing cuDNN at link time; the addon loads without it).
// The functions it adds to the addon's exports are declared for TypeScript in src/ops/conv/cudnn-native.ts.
#pragma once
#include <napi.h>

#include <string>

namespace fk_cudnn {

// How the addon turns a failing library call into the JS error its factory builds (addon.cc's ThrowLib).
using ThrowFn = Napi::Value (*)(Napi::Env env, const char* lib, const char* fn, int code, const std::string& name,
                                const std::string& desc);

// Adds cudnnLoad, cudnnLoaded, cudnnVersion, cudnnEnsureHandle, cudnnConv, cudnnDeclineReason, cudnnPlanCount and
// cudnnClearPlans to `exports`.
void Register(Napi::Env env, Napi::Object exports, ThrowFn thrower);

}  // namespace fk_cudnn
