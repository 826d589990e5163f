// How messages name options, and param values from Params.
#include <algorithm>
#include <charconv>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/diagnostic.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "jit/codegen.h"
#include "jit/kernel_abi.h"
#include "jit/nvrtc.h"
#include "lib/internal.h"

namespace fusejit {

namespace {
// Per OptionField (in its order): the name in the C++ API, on the `fusejit` command line, and in
// the Python package (python/fusejit/__init__.py).
struct OptionNames {
  OptionField field;
  const char* api;
  const char* cli;
  const char* python;
};
constexpr OptionNames kOptionNames[] = {
    {OptionField::Arch, "Options::arch", "--arch", "arch"},
    {OptionField::NvrtcOptions, "Options::nvrtc_options", "--nvrtc-option", "nvrtc_options"},
    {OptionField::Params, "params", "--param", "params"},
    {OptionField::InputFiles, "RunOptions::input_files", "--input", "input_files"},
    {OptionField::InputRanges, "RunOptions::input_ranges", "--range", "input_ranges"},
    {OptionField::SaveDir, "RunOptions::save_dir", "--save-dir", "save_dir"},
    {OptionField::RowSplit, "Options::row_split", "--row-split", "row_split"},
    {OptionField::RowCacheLimit, "Options::row_cache_limit", "--row-cache-limit", "row_cache_limit"},
    {OptionField::Device, "Options::device", "--device", "device"},
    {OptionField::FastMath, "Options::fast_math", "--fast-math", "fast_math"},
    {OptionField::Seed, "RunOptions::seed", "--seed", "seed"},
    {OptionField::SpecialValues, "RunOptions::special_values", "--special", "special_values"},
};
}  // namespace

std::string option_name(OptionField field, MessageStyle style) {
  const OptionNames& n = kOptionNames[static_cast<size_t>(field)];
  FJ_CHECK(n.field == field, "option_name: kOptionNames is out of OptionField's order");
  switch (style) {
    case MessageStyle::Api: return n.api;
    case MessageStyle::CommandLine: return n.cli;
    case MessageStyle::Python: return n.python;
  }
  return n.api;
}

namespace {
// The NVRTC option without its leading dashes ("--fmad=true": "fmad=true").
std::string_view bare(std::string_view nvrtc_option) {
  return nvrtc_option.substr(std::min(nvrtc_option.find_first_not_of('-'), nvrtc_option.size()));
}

// What an NVRTC option fusejit passes on takes after '=' (NVRTC's own rules, found by running
// NVRTC 13.0 on each: "--dopt=off" and "--ftz=1" are rejected, "-G=1" too).
enum class ValueForm {
  None,         // a flag: no value
  Bool,         // true or false
  Count,        // a decimal integer >= 0
  Density,      // a decimal integer from 0 to 101 (--jump-table-density)
  On,           // on (--dopt: NVRTC takes no other value)
  Std,          // c++17 or c++20 (fusejit's kernels need C++17)
  FastCompile,  // 0, min, mid or max
  Text,         // any non-empty text, which NVRTC or ptxas checks
};

// An NVRTC option fusejit passes on: one of those NVRTC documents ("Supported Compile Options",
// NVRTC user guide, CUDA 13) that changes how the kernel is optimised, debugged or diagnosed, or
// its float math as the mode allows (loosens_float_math), but neither what it computes otherwise
// nor what NVRTC writes. NVRTC takes `--NAME` and `-ALIAS` and no other spelling ("--lineinfo"
// and "-generate-line-info" are unknown to it).
struct PassedOption {
  std::string_view name;   // after "--"
  std::string_view alias;  // after "-" ("": none)
  ValueForm value;
  bool nvcc = true;  // nvcc 13.0 takes it (an ahead-of-time .cu's nvcc command leaves the others out)
  std::string_view example = "";  // a Text value NVRTC takes (passed_nvrtc_options)
};

constexpr PassedOption kPassedOptions[] = {
    {"device-debug", "G", ValueForm::None},
    {"generate-line-info", "lineinfo", ValueForm::None},
    {"dopt", "dopt", ValueForm::On},
    {"ptxas-options", "Xptxas", ValueForm::Text, true, "-v"},
    {"maxrregcount", "maxrregcount", ValueForm::Count},
    {"ftz", "ftz", ValueForm::Bool},
    {"prec-sqrt", "prec-sqrt", ValueForm::Bool},
    {"prec-div", "prec-div", ValueForm::Bool},
    {"fmad", "fmad", ValueForm::Bool},
    {"use_fast_math", "use_fast_math", ValueForm::None},
    {"extra-device-vectorization", "extra-device-vectorization", ValueForm::None},
    {"modify-stack-limit", "modify-stack-limit", ValueForm::Bool, false},
    {"jump-table-density", "", ValueForm::Density},
    {"device-stack-protector", "device-stack-protector", ValueForm::Bool},
    {"no-source-include", "no-source-include", ValueForm::None, false},
    {"std", "std", ValueForm::Std},
    {"builtin-move-forward", "builtin-move-forward", ValueForm::Bool, false},
    {"builtin-initializer-list", "builtin-initializer-list", ValueForm::Bool, false},
    {"disable-warnings", "w", ValueForm::None},
    {"device-as-default-execution-space", "default-device", ValueForm::None, false},
    {"device-int128", "device-int128", ValueForm::None, false},
    {"device-float128", "device-float128", ValueForm::None, false},
    {"optimization-info", "opt-info", ValueForm::Text, true, "inline"},
    {"display-error-number", "err-no", ValueForm::None},
    {"no-display-error-number", "no-err-no", ValueForm::None},
    {"diag-error", "diag-error", ValueForm::Text, true, "20"},
    {"diag-suppress", "diag-suppress", ValueForm::Text, true, "20"},
    {"diag-warn", "diag-warn", ValueForm::Text, true, "20"},
    {"brief-diagnostics", "brief-diag", ValueForm::Bool},
    {"split-compile", "split-compile", ValueForm::Count},
    {"minimal", "minimal", ValueForm::None, false},
    {"Ofast-compile", "Ofc", ValueForm::FastCompile},
    {"frandom-seed", "frandom-seed", ValueForm::Text, true, "1"},
};

// The entry `opt` spells (its name before any '='), or nullptr.
const PassedOption* passed_option(std::string_view opt) {
  const std::string_view name = opt.substr(0, opt.find('='));
  for (const PassedOption& p : kPassedOptions)
    if ((name.starts_with("--") && name.substr(2) == p.name) ||
        (!p.alias.empty() && name.starts_with('-') && !name.starts_with("--") && name.substr(1) == p.alias))
      return &p;
  return nullptr;
}

// The values a form takes where they are few, and the refusal that says so ({} for other forms).
std::pair<std::vector<std::string_view>, std::string_view> choices(ValueForm form) {
  switch (form) {
    case ValueForm::Bool: return {{"true", "false"}, "takes true or false"};
    case ValueForm::On: return {{"on"}, "takes the value on (NVRTC's only one)"};
    case ValueForm::Std: return {{"c++17", "c++20"}, "takes c++17 or c++20 (fusejit's kernels need C++17)"};
    case ValueForm::FastCompile: return {{"0", "min", "mid", "max"}, "takes 0, min, mid or max"};
    default: return {};
  }
}
}  // namespace

std::vector<std::string> passed_nvrtc_options(bool aliases) {
  std::vector<std::string> out;
  for (const PassedOption& p : kPassedOptions) {
    if (aliases && p.alias.empty()) continue;
    // A value NVRTC takes: the first of a few, a count, or the table's example.
    const std::string v = p.value == ValueForm::Count     ? "32"
                          : p.value == ValueForm::Density ? "50"
                          : p.value == ValueForm::Text    ? std::string(p.example)
                          : p.value == ValueForm::None    ? ""
                                                          : std::string(choices(p.value).first.front());
    out.push_back((aliases ? "-" + std::string(p.alias) : "--" + std::string(p.name)) + (v.empty() ? "" : "=" + v));
  }
  return out;
}

std::string nvcc_option(std::string_view nvrtc_option) {
  const PassedOption* p = passed_option(nvrtc_option);
  return p && !p->nvcc ? "" : std::string(nvrtc_option);
}

bool chooses_target(std::string_view nvrtc_option) {
  const std::string_view b = bare(nvrtc_option);  // any number of dashes: "---arch=sm_80" too
  return b.starts_with("arch") || b.starts_with("gpu-architecture") || b.starts_with("gpu-name");
}

namespace {

// Whether an NVRTC option undoes one of the strict mode's (jit::kStrictFloatOptions; the caller's
// options come last, so they would win): the kernels would no longer give the reference's bits
// while `fusejit run` said "strict (bitwise)". "--fmad=false" is undone by "fmad=true".
bool loosens_float_math(std::string_view nvrtc_option) {
  const std::string_view o = bare(nvrtc_option);
  if (o == "use_fast_math") return true;
  for (std::string_view strict : jit::kStrictFloatOptions) {
    strict = bare(strict);
    const size_t eq = strict.find('=');
    const std::string_view flipped = strict.substr(eq + 1) == "true" ? "false" : "true";
    if (o.substr(0, eq + 1) == strict.substr(0, eq + 1) && o.substr(eq + 1) == flipped) return true;
  }
  return false;
}

// The macro an option defines (`-DNAME=V` / `define-macro=NAME=V`: "NAME=V"), or "" for another option.
std::string_view defined_macro(std::string_view opt) {
  for (std::string_view prefix : {std::string_view("-D"), std::string_view("--define-macro=")})
    if (opt.starts_with(prefix)) return opt.substr(prefix.size());
  return {};
}

constexpr std::string_view kMinBlocks = "FJ_RED_MIN_BLOCKS=";

// NVRTC options (after their dashes) that read files: include paths, headers, precompiled headers.
constexpr std::string_view kFileOptions[] = {"include-path", "include", "pre-include", "pch", "use-pch", "create-pch", "pch-dir"};
constexpr int kMaxMinBlocks = 32;  // the most blocks an SM holds (sm_90; 8 of 256 threads fill its 2,048)

// Whether FJ_RED_MIN_BLOCKS=`value` is a launch bound: a decimal integer from 1 to kMaxMinBlocks,
// no leading 0 (C reads 010 as octal 8, and 08 not at all).
bool min_blocks_valid(std::string_view value) {
  if (value.starts_with('0')) return false;
  int k = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), k);
  return ec == std::errc() && end == value.data() + value.size() && k >= 1 && k <= kMaxMinBlocks;
}

// The macros a reduction kernel's prelude reads to run another way with the same bits, to measure
// each way (ir/scalar/fj_reduce.h): `-DNAME` / `define-macro=NAME` (the bare form), FJ_RED_MIN_BLOCKS
// with a valid value.
bool reduction_switch(std::string_view opt) {
  const std::string_view name = defined_macro(opt);
  if (name.starts_with(kMinBlocks)) return min_blocks_valid(name.substr(kMinBlocks.size()));
  return name == "FJ_RED_NO_VECTOR" || name == "FJ_RED_NO_KEPT" || name == "FJ_RED_NO_GROUPS" ||
         name == "FJ_RED_NO_WARP_TREE";
}

// Why `value`, what follows '=' in an option of kPassedOptions (nullopt: no '='), does not fit
// its form; "" if it does.
std::string value_refusal(const PassedOption& p, std::optional<std::string_view> value) {
  if (p.value == ValueForm::None) return value ? "takes no value" : "";
  if (!value) return fmt::format("takes its value in the same string (--{}=VALUE, as NVRTC reads one word)", p.name);
  const std::string_view v = *value;
  if (const auto [values, say] = choices(p.value); !values.empty())
    return std::find(values.begin(), values.end(), v) != values.end() ? "" : std::string(say);
  if (p.value == ValueForm::Text) return v.empty() ? "takes a value after '='" : "";
  const bool digits = !v.empty() && v.size() <= 9 && v.find_first_not_of("0123456789") == std::string_view::npos;
  if (p.value == ValueForm::Density)
    return digits && std::stoi(std::string(v)) <= 101 ? "" : "takes a decimal integer from 0 to 101";
  return digits ? "" : "takes a count (a decimal integer, 0 or more)";
}

// Whether `opt` is one word for NVRTC: not empty, no blank or NUL in it (NVRTC reads " --fmad=true"
// as the option, and "--fmad" then "true" as two).
bool one_word(std::string_view opt) {
  return !opt.empty() && opt.find_first_of(std::string_view(" \t\n\r\v\f\0", 7)) == std::string_view::npos;
}

// Why an option NVRTC writes no whole kernel image with, lets assume what fusejit's launches break,
// or writes files of its own, is refused ("" if it is none of these).
std::string output_refusal(std::string_view b) {
  const auto any_of = [&](std::initializer_list<std::string_view> names) {
    return std::any_of(names.begin(), names.end(), [&](std::string_view n) { return b.substr(0, b.find('=')) == n; });
  };
  if (any_of({"dc", "dw", "rdc", "device-c", "device-w", "relocatable-device-code", "extensible-whole-program", "ewp",
              "fdevice-syntax-only", "dlink-time-opt", "dlto", "gen-opt-lto", "optix-ir"}))
    return "changes what NVRTC writes (relocatable code, LTO or OptiX IR, or none), which fusejit loads as a whole "
           "kernel image";
  if (any_of({"restrict"}))
    return "lets NVRTC assume that no two kernel pointers alias, which a launch with an output in place over an input "
           "breaks (fusejit's kernels carry no __restrict__: docs/api.md)";
  if (any_of({"time", "fdevice-time-trace"}))
    return "writes a report file of its own, which a kernel cache hit would skip; `fusejit run --no-cache` reports "
           "compile times";
  return "";
}

// Why an extra NVRTC option is refused whatever the mode ("" if it is not): it is not one word
// (NVRTC reads " --fmad=true" and "--fmad" then "true" as the option; a check of whole words
// would not), chooses the target (it would silently build for another GPU than the one named),
// makes the compile read files whose contents the kernel cache's key cannot see, defines macros
// (the preludes' math calls are names a macro can replace), is refused by output_refusal, or is
// none of kPassedOptions (NVRTC's hidden options, such as --fassociative-math, pass NVRTC's own
// check); its value does not fit; or in strict mode it loosens float math.
std::string refusal(std::string_view opt, const Options& o) {
  const std::string_view b = bare(opt);
  if (opt.find('\0') != std::string_view::npos) return "holds a NUL byte (NVRTC would read the option up to it)";
  if (!one_word(opt))
    return "is not one word (an option and its value go in one string: --maxrregcount=32)";
  if (chooses_target(opt))
    return "chooses the target; use " + option_name(OptionField::Arch, o.message_style) + " instead";
  if (opt.starts_with("-I") || std::any_of(std::begin(kFileOptions), std::end(kFileOptions), [&](std::string_view n) { return b.starts_with(n); }))
    return "makes the compile read files whose contents the kernel cache's key cannot see (an edited header would "
           "reuse a stale binary); fusejit's kernels include only its own preludes, so no include path or header is "
           "needed";
  if (const std::string_view macro = defined_macro(opt); macro.starts_with(kMinBlocks) && !min_blocks_valid(macro.substr(kMinBlocks.size())))
    return fmt::format("gives FJ_RED_MIN_BLOCKS a value that is no launch bound: a decimal integer from 1 to {} (the "
                       "blocks per SM of a reduction kernel's __launch_bounds__(256, k))", kMaxMinBlocks);
  if (reduction_switch(opt)) return "";
  if (opt.starts_with("-D") || opt.starts_with("-U") || b.starts_with("define-macro") || b.starts_with("undefine-macro"))
    return "defines or undefines a macro, which can change the preludes' semantics (a macro can rename a math "
           "call); fusejit's kernels take none but FJ_RED_MIN_BLOCKS=k (a launch bound) and the switches "
           "FJ_RED_NO_VECTOR, FJ_RED_NO_KEPT, FJ_RED_NO_GROUPS and FJ_RED_NO_WARP_TREE (the same bits, another "
           "way: docs/ops.md)";
  if (std::string why = output_refusal(b); !why.empty()) return why;
  const PassedOption* p = passed_option(opt);
  if (!p)
    return "is not among the NVRTC options fusejit passes on: those NVRTC documents that change how a kernel is "
           "optimised, debugged or diagnosed (--maxrregcount=N, -lineinfo, -G, -Xptxas=..., ...: docs/api.md lists "
           "them), spelt as NVRTC takes them (--NAME or its short -ALIAS)";
  const size_t eq = opt.find('=');
  if (std::string why = value_refusal(*p, eq == std::string_view::npos ? std::nullopt : std::optional(opt.substr(eq + 1)));
      !why.empty())
    return why;
  if (!o.fast_math && loosens_float_math(opt))
    return fmt::format("changes floating-point results, which strict mode keeps bit for bit equal to the reference "
                       "(it compiles with {}); for fast math, use {}", fmt::join(jit::kStrictFloatOptions, " "),
                       option_name(OptionField::FastMath, o.message_style));
  return "";
}

// Whether `opt` is ptxas's option list without its value ("-Xptxas", "--ptxas-options"): NVRTC
// then reads the next option as the list, as nvcc does.
bool ptxas_list_head(std::string_view opt) { return opt == "-Xptxas" || opt == "--ptxas-options"; }

// Why ptxas options `list` (comma-separated, as NVRTC passes them on) are refused: one chooses
// the target, or makes relocatable code (ptxas -c: an image fusejit cannot load whole, what -rdc
// is refused for); "" if none does. ptxas's other options pass (NVRTC's PTX carries the float
// rounding of strict mode, mul.rn / add.rn, which ptxas does not contract whatever its --fmad).
std::string ptxas_refusal(std::string_view list, const Options& o) {
  for (size_t start = 0; start <= list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string_view item = list.substr(start, comma - start), b = bare(item);
    if (chooses_target(item))
      return "passes ptxas an option that chooses the target; use " + option_name(OptionField::Arch, o.message_style) +
             " instead";
    if (b == "c" || b == "compile-only" || b == "ewp" || b == "extensible-whole-program" || b == "compile-as-tools-patch")
      return "passes ptxas an option that makes relocatable code, which fusejit loads as a whole kernel image";
    start = comma + 1;
  }
  return "";
}

}  // namespace

// Options::nvrtc_options that fusejit takes (refusal(), ptxas_refusal(): a UserError naming the
// option otherwise).
void check_extra_nvrtc_options(const Options& o) {
  const std::vector<std::string>& list = o.nvrtc_options;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string& opt = list[i];
    std::string why;
    if (ptxas_list_head(opt) && i + 1 < list.size()) {
      const std::string& value = list[++i];
      why = !one_word(value) ? "is not followed by one word (ptxas's options, comma-separated: -Xptxas then -v,-O3)"
                : ptxas_refusal(value, o);
    } else if (why = refusal(opt, o); why.empty() && opt.find('=') != std::string::npos) {
      if (const PassedOption* p = passed_option(opt); p && p->name == "ptxas-options")
        why = ptxas_refusal(std::string_view(opt).substr(opt.find('=') + 1), o);
    }
    // A NUL shown as \x00 (as Error shows one), every other control character as '?' (a newline
    // would let an option forge an "error:" line in what(): a reviewer's find).
    if (!why.empty()) throw ir::UserError("NVRTC option '" + ir::terminal_safe(ir::escape_invalid_utf8(opt)) + "' " + why);
  }
}

void check_options(const Options& o) {
  // Enums from a cast integer (a C caller, a binding): refused, not taken for some other value.
  if (static_cast<unsigned>(o.message_style) > static_cast<unsigned>(MessageStyle::Python))
    throw ir::UserError(fmt::format("Options::message_style: invalid MessageStyle value {}",
                                    static_cast<unsigned>(o.message_style)));
  if (static_cast<unsigned>(o.backend) > static_cast<unsigned>(Backend::Cpu))
    throw ir::UserError(fmt::format("Options::backend: invalid Backend value {}", static_cast<unsigned>(o.backend)));
  ir::check_path(o.cache_dir, "cache folder");  // before any use: a path cut at a NUL is another one
  ir::check_path(o.dump_dir, "dump folder");
  if (o.device < 0)
    throw ir::UserError(option_name(OptionField::Device, o.message_style) + " " + std::to_string(o.device) +
                        ": a CUDA device ordinal is 0 or more");
  if (o.row_split < 0)
    throw ir::UserError(option_name(OptionField::RowSplit, o.message_style) + " " + std::to_string(o.row_split) +
                        ": must be >= 0 (0: the launcher's rule, 1: never split)");
  if (o.row_cache_limit < 0)
    throw ir::UserError(option_name(OptionField::RowCacheLimit, o.message_style) + " " +
                        std::to_string(o.row_cache_limit) + ": must be >= 0 (0: the launcher's rule)");
}

std::function<bool(const ir::FusionGroup&)> vector_rows_of(const ir::Graph& g, bool fast_math) {
  return [&g, fast_math](const ir::FusionGroup& grp) {
    jit::CodegenOptions cg;
    cg.fast_math = fast_math;
    return jit::vector_rows_ok(jit::generate_kernel(g, grp, cg).signature, grp.iter_shape);
  };
}

ir::SplitRules split_rules(const Options& o, int64_t shared_optin) {
  ir::SplitRules r;
  r.row_split = o.row_split;
  r.row_cache = o.row_cache;
  r.row_cache_limit = shared_optin > 0 ? ir::row_cache_limit_for(shared_optin) : ir::kRowCacheBytes;
  r.kept_values = !o.fast_math;
  r.short_rows = shared_optin > 0;
  if (o.row_cache_limit > 0 && shared_optin > 0 && o.row_cache_limit > r.row_cache_limit) r.capped_from = o.row_cache_limit;
  if (o.row_cache_limit > 0) r.row_cache_limit = shared_optin > 0 ? std::min(r.row_cache_limit, o.row_cache_limit) : o.row_cache_limit;
  return r;
}

namespace {
// A param value set at a call, converted to the param's dtype: the fit rule of param defaults in
// graph text (ir::check_literal_fits: 300 for a u8, NaN for an i32, 1e5 for an f16 are errors).
ir::Scalar param_value(const ir::Graph& g, const ir::ParamDecl& p, const Scalar& v, MessageStyle style) {
  const ir::Node& n = g.node(p.node);
  const ir::Literal l = to_ir_literal(v);
  if (const std::string why = ir::literal_misfit(l, n.dtype); !why.empty())
    throw ir::UserError(fmt::format("{}{}={}: does not fit {}, the dtype of param '{}' ({}; a default of {} is refused too)",
                                    // Python passes params as keyword arguments: no option to name
                                    style == MessageStyle::Python ? "" : option_name(OptionField::Params, style) + " ",
                                    n.name, ir::literal_text(l),
                                    ir::dtype_name(n.dtype), n.name, why, ir::literal_text(l)));
  return ir::literal_to_scalar(l, n.dtype);
}
}  // namespace

void resolve_params_into(const ir::Graph& g, const Params& params, MessageStyle style, std::vector<ir::Scalar>& out) {
  out.clear();
  for (const ir::ParamDecl& p : g.params) out.push_back(p.default_value);
  if (!params.positional().empty() && !params.named().empty())
    throw ir::UserError(option_name(OptionField::Params, style) + ": give param values by name or by position, not both");
  const std::vector<Scalar>& pos = params.positional();
  if (!pos.empty() && pos.size() != g.params.size())
    throw ir::UserError(fmt::format("{}: the graph has {} param(s), got {} positional value(s)",
                                    option_name(OptionField::Params, style), g.params.size(), pos.size()));
  for (size_t k = 0; k < pos.size(); ++k) out[k] = param_value(g, g.params[k], pos[k], style);
  for (const auto& entry : params.named()) {
    // Not a structured binding: clang 14 cannot capture one in the lambda below.
    const std::string& name = entry.first;
    const auto& value = entry.second;
    auto it = std::find_if(g.params.begin(), g.params.end(), [&](const ir::ParamDecl& p) { return g.node(p.node).name == name; });
    if (it == g.params.end()) {
      std::string names;
      for (const ir::ParamDecl& p : g.params) names += (names.empty() ? "" : ", ") + g.node(p.node).name;
      // "--param eps: ..." on the command line (as the user typed it), "params: ..." elsewhere.
      const std::string where = style == MessageStyle::CommandLine
                                    ? option_name(OptionField::Params, style) + " " + name
                                    : option_name(OptionField::Params, style);
      throw ir::UserError(fmt::format("{}: the graph has no param named '{}' ({})", where, name,
                                      names.empty() ? "it has no params" : "its params: " + names));
    }
    out[static_cast<size_t>(it - g.params.begin())] = param_value(g, *it, value, style);
  }
}

std::vector<ir::Scalar> resolve_params(const ir::Graph& g, const Params& params, MessageStyle style) {
  std::vector<ir::Scalar> out;
  resolve_params_into(g, params, style, out);
  return out;
}

}  // namespace fusejit
