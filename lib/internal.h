// Internal glue between the public API (lib/include/fusejit) and the ir/ and jit/ layers.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fusejit/fusejit.h"
#include "ir/builder.h"
#include "ir/graph.h"
#include "ir/plan.h"

namespace fusejit {

struct Graph::Impl {
  ir::Graph graph;
  std::string source;  // graph text, for diagnostics ("" when built in code)
};

inline ir::DType to_ir(DType t) { return static_cast<ir::DType>(t); }
// Throws Error(User) "<what>: invalid DType value N" for a value outside the enum (a cast integer).
void check_dtype(DType t, const std::string& what);
// Whether `t` is one of DType's enumerators (a cast integer may be anything); for hot paths, which
// call check_dtype (and build its message) only when it is not.
inline bool valid_dtype(DType t) { return static_cast<unsigned>(t) <= static_cast<unsigned>(DType::F64); }
// Throws ir::UserError for a PlanKind that is neither Fused nor Unfused (a cast integer).
void check_plan_kind(PlanKind kind);
inline DType from_ir(ir::DType t) { return static_cast<DType>(t); }
// A public Scalar as a weak literal of its kind, and converted to a dtype by the cast rules.
ir::Literal to_ir_literal(const Scalar& s);
ir::Scalar to_ir_scalar(const Scalar& s, ir::DType dtype);
// An IR scalar of `dtype` as the public Scalar of its kind (integers exact).
Scalar public_scalar(const ir::Scalar& v, ir::DType dtype);

// `j` as JSON text indented by 2, its strings' bytes that are not UTF-8 (a file name's) written as
// the text "\xNN", as Error holds them: one encoding in every JSON fusejit writes.
std::string json_text(nlohmann::json j);

// Runs f, translating every internal exception into fusejit::Error. `file`/`source` give the
// graph text for rendering located user errors.
template <class F>
auto translate_errors(F&& f, const std::string& file = {}, std::string_view source = {}) -> decltype(f());

[[noreturn]] void rethrow_current(const std::string& file, std::string_view source);

template <class F>
auto translate_errors(F&& f, const std::string& file, std::string_view source) -> decltype(f()) {
  try {
    return f();
  } catch (...) {
    rethrow_current(file, source);
  }
}

// Sends a warning to the installed handler (default: stderr).
void warn(std::string_view message);

// Set on a thread fusejit starts for a call (a compile worker) for its lifetime: its warnings'
// warning_origin() is the calling thread, so a handler can give them to that call.
class WarningOrigin {
 public:
  explicit WarningOrigin(std::thread::id caller);
  ~WarningOrigin();
  WarningOrigin(const WarningOrigin&) = delete;
  WarningOrigin& operator=(const WarningOrigin&) = delete;

 private:
  std::optional<std::thread::id> saved_;
};

// Warns about what a graph just parsed or built probably did not mean: once per input that no
// output depends on ("FILE:LINE:COL: input 'b' is not used by any output"), and once per pair of
// named dims that a broadcast of a reduction without keepdim lines up (ir/dim_alignment.h: the
// graph then holds only while they are equal or one is 1).
// `may_be_unused`: the inputs not to warn of (GraphBuilder::allow_unused).
void warn_about_graph(const ir::Graph& g, const std::set<std::string>& may_be_unused = {});

// The options messages name, each as an API user writes it ("Options::arch") or as a `fusejit`
// user does ("--arch"), by Options::message_style.
enum class OptionField {
  Arch, NvrtcOptions, Params, InputFiles, InputRanges, SaveDir, RowSplit, RowCacheLimit, Device, FastMath, Seed,
  SpecialValues
};
std::string option_name(OptionField field, MessageStyle style);

// How reduction kernels run under `o` (Options::row_split, row_cache, row_cache_limit) on a GPU
// whose blocks may opt in to `shared_optin` bytes of shared memory (0: no GPU, the CPU path or a
// plan without one): the launcher's rules, which the plan's notes and traffic follow too. The row
// cache limit is ir::row_cache_limit_for(shared_optin) (ir::kRowCacheBytes without a GPU), or
// Options::row_cache_limit when set, capped by the GPU's.
ir::SplitRules split_rules(const Options& o, int64_t shared_optin = 0);
// ir::PlanOptions::vector_rows for the fused plan of rewritten graph `g`: whether a row reduction
// group's kernel (generated as the fused path generates it) reads its rows with vectors
// (jit::vector_rows_ok), the only rows a GPU re-reads as short rows. `g` must outlive it.
std::function<bool(const ir::FusionGroup&)> vector_rows_of(const ir::Graph& g, bool fast_math);
// Throws ir::UserError for an Options::row_split or row_cache_limit below 0, a backend or
// message_style that is none of its enum's values, or a cache_dir or dump_dir holding a NUL byte (compile, load and plan_graph check them before any use).
void check_options(const Options& o);
// Every NVRTC option fusejit passes on (Options::nvrtc_options; lib/options.cpp's table), each with
// a value NVRTC takes where it takes one: the long spellings (--NAME), or with `aliases` the short
// ones (-ALIAS) where NVRTC has one. For tests, which compile with them all.
std::vector<std::string> passed_nvrtc_options(bool aliases);
// The nvcc option that does what NVRTC option `nvrtc_option` does (itself), or "" where nvcc has
// none (-minimal, -default-device: an ahead-of-time .cu's nvcc command leaves it out).
std::string nvcc_option(std::string_view nvrtc_option);
// Whether an NVRTC option chooses the target (-arch, --gpu-architecture, ...): Options::arch does,
// and the output is labelled with it, so Options::nvrtc_options and a folder's index.json may not.
bool chooses_target(std::string_view nvrtc_option);
// Throws ir::UserError for an Options::nvrtc_options entry fusejit does not take (lib/options.cpp,
// refusal): one that chooses the target, reads files (-I, --pre-include, precompiled headers: the
// cache key could not see them), defines a macro, changes what NVRTC writes, is not one word, or,
// without fast_math, loosens the strict mode's float math. Program::load applies it to an index.
void check_extra_nvrtc_options(const Options& o);

// The value of every graph param (slot order, each converted to its param's dtype) from named or
// positional Params; the default for every param not named. Throws ir::UserError, naming the
// option as `style` writes it: an unknown name (listing the graph's params), a positional count
// other than the graph's, or both forms at once.
std::vector<ir::Scalar> resolve_params(const ir::Graph& g, const Params& params, MessageStyle style);
// The same into `out` (no allocation once `out` has the capacity, unless an error is thrown).
void resolve_params_into(const ir::Graph& g, const Params& params, MessageStyle style, std::vector<ir::Scalar>& out);

TensorInfo tensor_info(const ir::Graph& g, ir::NodeId id, const std::string& name);

}  // namespace fusejit
