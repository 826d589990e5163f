// NVRTC through the kernel cache, for tests that compile large programs to prove that NVRTC
// accepts them (tests/test_nvrtc_samples.cpp, test_codegen.cpp, test_reduce_nvrtc.cpp).
#pragma once

#include <string>
#include <vector>

#include "jit/cache.h"
#include "jit/codegen.h"
#include "jit/nvrtc.h"

namespace fusejit::testing {

// compile_cuda(source, name, request) behind the process-wide kernel cache, i.e. the folder of
// FUSEJIT_CACHE_DIR (the tests' own, tests/CMakeLists.txt). The key covers the source, options,
// target, NVRTC version and codegen version, so a changed kernel or NVRTC compiles anew, while a
// second suite over the same tree (CI's sanitized one, docs/testing.md) loads the binaries: NVRTC
// is not instrumented, so running it again there checks nothing new and took ~40% of that suite.
// Only a successful compile is stored; CompileError propagates as from compile_cuda. Returns the
// CUBIN (or PTX text with its '\0').
inline std::vector<char> compile_cuda_cached(const std::string& source, const std::string& name,
                                             const jit::CompileRequest& request) {
  return *jit::compile_cached(jit::KernelCache::global(), source, name, request, jit::kCodegenVersion).kernel->binary;
}

}  // namespace fusejit::testing
