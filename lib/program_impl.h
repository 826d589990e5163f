// Program::Impl: a graph rewritten, planned (fused and unfused), generated and compiled for one
// backend, with what its launches keep between calls. Private to the Program implementation
// (lib/program.cpp compiles and loads, lib/program_launch.cpp launches, lib/program_run.cpp runs
// host tensors); everything else, run_graph included, uses the public API.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fusejit/fusejit.h"
#include "ir/graph.h"
#include "ir/passes/rewrite.h"
#include "ir/plan.h"
#include "jit/cpu_runner.h"
#include "jit/driver.h"
#include "jit/gpu_build.h"
#include "jit/gpu_runner.h"
#include "jit/launch.h"
#include "lib/internal.h"

namespace fusejit {

struct AotFolder;  // lib/aot.h

struct Program::Impl {
  // A plan's kernels compiled one way: as planned (variant 0), or all with 64-bit index math
  // (variant 1, built when an iteration space of 2^31 elements or more first needs it).
  struct Variant {
    std::vector<jit::GeneratedKernel> kernels;  // one per plan group
    jit::CompiledPlan gpu;                      // GPU: the binaries (CUBIN or PTX)
    std::shared_ptr<jit::CpuProgram> cpu;       // CPU: the host module
    std::vector<KernelInfo> infos;              // one per group
  };
  // A path's variants loaded in one CUDA context (by handle and jit::context_id).
  struct Loaded {
    jit::cu::Context ctx = nullptr;
    uint64_t ctx_id = 0;
    std::shared_ptr<jit::DeviceContext> dc;
    std::array<std::shared_ptr<const jit::GpuProgram>, 2> variants;
  };
  // One set of dim values seen by a launch: its launch state, or the Program (compiled for the
  // same pattern of size-1 dims) that runs it when this plan does not hold there.
  struct DimsEntry {
    uint64_t hash = 0;
    std::vector<int64_t> dims;
    std::shared_ptr<const jit::LaunchState> state;
    std::shared_ptr<const Impl> delegate;
  };
  // Most dims sets a path keeps; past it the oldest is dropped (and made again when seen again).
  static constexpr size_t kMaxDimsEntries = 64;

  // One plan of the program and everything its launches reuse.
  struct Path {
    PlanKind kind = PlanKind::Fused;
    ir::Plan plan;                                   // over graph_of(kind), at the compiled dims
    std::shared_ptr<const jit::PlanBindings> bindings;
    mutable std::array<std::shared_ptr<const Variant>, 2> variants;  // [1] guarded by mu
    mutable std::mutex mu;                           // guards variants[1], contexts, retired, dims
    mutable std::vector<Loaded> contexts;
    mutable std::vector<Loaded> retired;             // of contexts destroyed since (never searched)
    mutable std::vector<DimsEntry> dims;
    mutable size_t next_evict = 0;
  };

  Graph graph;                      // as given
  Graph rewritten;                  // after rewrites: what the fused kernels compute
  ir::RewriteResult rewrite;
  Options options;
  Backend backend = Backend::Cpu;
  std::string target;               // "sm_90 (CUBIN)", "host C++ (...)", ...
  jit::Target gpu_target;           // GPU: what NVRTC builds
  bool loaded = false;              // from an ahead-of-time folder (Program::load)
  std::shared_ptr<const AotFolder> aot;  // that folder's index (lib/aot.h)
  std::string backend_note;         // why the CPU was used under Backend::Auto
  bool dump_dir_from_env = false;   // options.dump_dir is FUSEJIT_DUMP_DIR's folder for it (compile)
  std::shared_ptr<jit::DeviceContext> device;  // GPU: the context opened at compile time
  ir::SplitRules rules;                        // how reduction kernels run (split_rules at the device)
  std::vector<ir::Scalar> default_params;      // every param's default, slot order

  Path fused;                                  // over rewritten.impl().graph
  mutable std::unique_ptr<Path> unfused;       // over graph.impl().graph; built on first use
  mutable std::once_flag unfused_once;
  mutable std::atomic<bool> unfused_ready{false};

  mutable std::mutex spec_mu;                  // guards specializations and spec_infos
  // By each dim's size class (0, 1, 2 for more).
  mutable std::vector<std::pair<std::vector<uint8_t>, std::shared_ptr<const Impl>>> specializations;
  mutable std::vector<KernelInfo> spec_infos;

  // Registered for fork(): see lock_for_fork.
  explicit Impl(Graph g);
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  // Before fork() (pthread_atfork's prepare handler, lib/program.cpp): takes this program's locks,
  // so no other thread is inside one of its brief critical sections (a dims lookup) when the child
  // is made, where a lock held at that instant would stay held for ever; after it, in the parent
  // and in the child, unlock_after_fork releases them.
  void lock_for_fork() const;
  void unlock_after_fork() const;
  mutable bool fork_locked_unfused = false;  // whether lock_for_fork took the unfused path's lock
  // The graph a plan was made for.
  const ir::Graph& graph_of(PlanKind kind) const {
    return (kind == PlanKind::Fused ? rewritten : graph).impl().graph;
  }
  // The path of `kind`, building the unfused one on first use. Throws as compile() does.
  const Path& path(PlanKind kind) const;
  // Variant `v` of `p`, compiled (and recorded in specializations()) on first need.
  const Variant& variant(const Path& p, int v) const;
};

// Compiles (or loads from the caches, or from the ahead-of-time folder) variant `v` of plan `p`
// for this program's backend and target.
std::shared_ptr<const Program::Impl::Variant> build_variant(const Program::Impl& impl, const Program::Impl::Path& p, int v);

// Rewrites the graph and plans its fused path under split_rules(options, shared_optin), for a GPU
// whose blocks may opt in to `shared_optin` bytes of shared memory (0: none; the unfused path is
// planned on first use).
std::shared_ptr<Program::Impl> rewrite_and_plan(const Graph& graph, const Options& options, int64_t shared_optin);

// Program::compile, which is this with `env_dump_dir_applies`: where false, FUSEJIT_DUMP_DIR is
// not read (a CPU-path Program::load compiles the folder's graph and writes nothing).
Program compile_program(const Graph& graph, const Options& options, bool env_dump_dir_applies);
// Opens device Options::device for the GPU backend: nullptr and the reason when there is none.
// Warns when the calling thread's current context (which fusejit uses as it is) is on another
// device than a non-zero Options::device.
std::shared_ptr<jit::DeviceContext> open_device(const Options& o, std::string* why_not);

// Code generation options of a plan's variant: the unfused plan is always strict with canonical
// names; variant 1 indexes in 64 bits.
jit::CodegenOptions codegen_options(PlanKind kind, const Options& o, int variant);

// What kernels() reports of one group: from its generated kernel, or (not built) from the plan;
// its bytes as the kernel runs under `rules`. `bindings`: ir::output_bindings(g), made once per plan.
KernelInfo kernel_info(const ir::Graph& g, const ir::FusionGroup& grp, const jit::GeneratedKernel& k, CacheOutcome outcome,
                       double compile_ms, const ir::SplitRules& rules, std::span<const int> bindings);
KernelInfo unbuilt_info(const ir::Graph& g, const ir::FusionGroup& grp, const ir::SplitRules& rules,
                        std::span<const int> bindings);

// The launch state of `p` at the dim values `dims` (Graph::dims order), made on first use and kept
// (at most kMaxDimsEntries per path); or, where p's plan does not hold at those dims, the Program
// compiled for them that runs them. Throws ir::UserError when the values do not fit the graph.
struct DimsHit {
  std::shared_ptr<const jit::LaunchState> state;
  std::shared_ptr<const Program::Impl> delegate;
};
DimsHit dims_entry(const Program::Impl& impl, const Program::Impl::Path& p, std::span<const int64_t> dims);
// The program (this one, or the specialization it delegates to) and launch state that run plan
// `kind` at `dims`.
std::pair<const Program::Impl*, DimsHit> resolve_dims(const Program::Impl& impl, PlanKind kind,
                                                      std::span<const int64_t> dims);

// The tensors of one launch: the caller's inputs and outputs, and intermediate buffers the caller
// provides (measure) or none (the launch finds its own).
struct LaunchTensors {
  std::span<const jit::TensorArg> inputs, outputs;
  std::span<const uint64_t> intermediates;
};

// One launch of `kind` on tensors whose dims have been bound into `dims` and whose dtypes, input
// shapes, strides and param values have been checked: looks up the dims entry, checks the output
// shapes and aliasing, and launches on the backend (`stream`: GPU only).
void launch_bound(const Program::Impl& impl, PlanKind kind, std::span<const int64_t> dims, const LaunchTensors& tensors,
                  std::span<const ir::Scalar> params, void* stream, const jit::LaunchOptions& options = {},
                  jit::LaunchScratch& scratch = jit::LaunchScratch::of_this_thread());

}  // namespace fusejit
