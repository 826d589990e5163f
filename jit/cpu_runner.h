// Running a plan's generated kernels on the CPU (the path used when there is no GPU, and the one
// that tests the generated source on every commit). The kernels are compiled by
// jit/host_compile.h (all kernels of a plan, or of several plans, as ONE shared object),
// arguments are packed with jit/kernel_abi.h exactly as for cuLaunchKernel, and each group is
// "launched" through its host trampoline.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/plan.h"
#include "ir/tensor.h"
#include "jit/codegen.h"
#include "jit/host_compile.h"

namespace fusejit::jit {

// A host buffer with 64-byte aligned storage (so the kernels' 16-byte vector path can run).
class HostBuffer {
 public:
  HostBuffer() = default;
  // Zero-filled; throws ir::UserError naming the size when the host has not enough memory.
  explicit HostBuffer(size_t bytes);
  HostBuffer(const void* data, size_t bytes);
  HostBuffer(const HostBuffer& o) : HostBuffer(o.data(), o.size()) {}
  HostBuffer& operator=(const HostBuffer& o);
  HostBuffer(HostBuffer&&) noexcept = default;
  HostBuffer& operator=(HostBuffer&&) noexcept = default;
  unsigned char* data() { return mem_.get(); }
  const unsigned char* data() const { return mem_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(unsigned char* p) const;
  };
  std::unique_ptr<unsigned char[], Free> mem_;
  size_t size_ = 0;
};

// One plan's kernels, generated and (after compile_cpu_programs) loaded. Holds a copy of the
// graph and plan so it stays valid on its own.
struct CpuProgram {
  ir::Graph graph;
  ir::Plan plan;
  std::vector<GeneratedKernel> kernels;      // one per plan group, plan order
  std::shared_ptr<HostModule> module;        // set by compile_cpu_programs
  std::vector<HostTrampoline> trampolines;   // one per plan group
  HostCompileResult compile;                 // how the module was obtained (hit / compile time)
};

// Generates the kernels of `plan` for `g` at its current shapes (nothing is compiled yet).
CpuProgram prepare_cpu_program(const ir::Graph& g, const ir::Plan& plan, const CodegenOptions& opts = {});

// Compiles the kernels of all `programs` as one host shared object (or finds it in the cache) and
// binds their trampolines. Throws HostCompileError on a compiler failure.
void compile_cpu_programs(std::span<CpuProgram* const> programs, const HostCompileOptions& opts = {});

// prepare + compile for one plan.
CpuProgram build_cpu_program(const ir::Graph& g, const ir::Plan& plan, const CodegenOptions& opts = {});

struct CpuRunResult {
  std::vector<HostBuffer> outputs;  // one per graph output (Graph::outputs order), C order bytes
  double run_ms = 0.0;              // steady-clock time of the kernel launches only
  int kernels_launched = 0;
  int vector_launches = 0;          // launches whose vec_ok was 1 (the vector path ran)
};

// Runs `prog` on host inputs. `inputs` holds one buffer per graph input (slot order) of exactly
// num_elements(shape) * dtype_size bytes; `params` the value of every graph param (slot order;
// empty = defaults). `launch` is the (serial) grid and block the trampolines emulate: the
// default, one thread, is the fastest on a CPU; others exercise the grid-stride loop. Throws
// ir::UserError on a wrong input count or byte size, ir::InternalError on a broken plan.
struct CpuRunOptions {
  LaunchShape launch;        // default: one block of one thread
  bool vector_path = true;   // false: clear vec_ok so only the scalar loop runs (tests)
  // true: every graph input is read from a copy that starts one element past a 16-byte boundary,
  // as a sub-tensor view would, so pack_args sees a misaligned pointer and clears vec_ok for
  // every kernel reading a graph input (tests of the runtime alignment check).
  bool misalign_inputs = false;
};
CpuRunResult run_cpu_program(const CpuProgram& prog, std::span<const HostBuffer> inputs,
                             std::span<const ir::Scalar> params = {}, const CpuRunOptions& opts = {});

struct CpuTensorRunResult {
  std::vector<ir::Tensor> outputs;  // one per graph output, with the output's dtype and shape
  double run_ms = 0.0;
  int kernels_launched = 0;
  int vector_launches = 0;  // launches whose vec_ok was 1
};
// The same on ir::Tensor inputs (one per graph input, slot order, with the input's dtype and
// current shape; a mismatch is an ir::UserError naming the input).
CpuTensorRunResult run_cpu_program(const CpuProgram& prog, std::span<const ir::Tensor> inputs,
                                   std::span<const ir::Scalar> params = {}, const CpuRunOptions& opts = {});

}  // namespace fusejit::jit
