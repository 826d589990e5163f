// A thin NVRTC wrapper: one call compiles a CUDA C++ source string to CUBIN or PTX for one target.
// No include paths are ever passed (generated kernels are self-contained), nothing is printed, and
// a failure throws CompileError carrying everything needed to debug it.
//
// NVRTC is loaded at run time (dlopen), as libcuda is, so libfusejit has no link-time dependency on
// it: a deployment that runs precompiled kernels (Program::load) needs only the driver. It is
// looked for, on first use, at $FUSEJIT_NVRTC when that is set (a path or soname, and nowhere
// else: FUSEJIT_NVRTC=none hides NVRTC), else by soname (nvrtc_search_order: the installed
// driver's major when older than the toolkit fusejit was built with, then libnvrtc.so.<that
// toolkit's major>, libnvrtc.so.13, .12, libnvrtc.so: LD_LIBRARY_PATH, libfusejit's RUNPATH, the
// loader cache), else under $CUDA_HOME, $CUDA_PATH, /usr/local/cuda and the toolkit found at build
// time (lib64/, targets/<arch>-linux/lib/).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jit/arch.h"

namespace fusejit::jit {

// What to compile and how.
struct CompileRequest {
  Target target;                              // sm_XY -> CUBIN, compute_XY -> PTX
  // NVRTC options other than the architecture (added from `target`), e.g. "--std=c++17",
  // "--fmad=false", "-default-device". Include-path options must not be used.
  std::vector<std::string> options;
  // Name expressions (e.g. "my_kernel<float>") whose lowered (mangled) names to look up.
  // extern "C" kernels need none: their symbol is their name.
  std::vector<std::string> name_expressions;
};

// A successful compilation.
struct CompileResult {
  Target target;
  std::vector<char> binary;   // the CUBIN image, or the PTX text including its final '\0' (as NVRTC returns)
  std::string log;            // NVRTC's program log (warnings); may be empty
  double compile_ms = 0;      // wall time of nvrtcCompileProgram plus output retrieval, milliseconds
  std::vector<std::pair<std::string, std::string>> lowered_names;  // (name expression, lowered name)
};

// NVRTC could not be loaded (or lacks an entry point fusejit uses) while something had to be
// compiled. what() says where it looked and what to install.
class NvrtcUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// True when NVRTC is loaded (or loads now). Never throws.
bool nvrtc_available();
// Why NVRTC is unavailable ("" when it is available): the places tried and their errors.
std::string nvrtc_unavailable_reason();
// Test hook: forget the loaded NVRTC and look again, at `library` only when given (a path that does
// not exist hides NVRTC), else as described above. Objects compiled before keep their binaries.
void reload_nvrtc_for_testing(std::optional<std::string> library);

// Where NVRTC is looked for, in order, on a machine whose driver is for CUDA `driver_cuda_version`
// (cuDriverGetVersion, e.g. 12040; 0: no driver): sonames, then the same names in the toolkit
// folders (see above). A CUDA 12 driver cannot load what NVRTC 13 builds (CUBIN or PTX), so its
// major's NVRTC comes first when fusejit was built with a newer toolkit.
std::vector<std::string> nvrtc_search_order(int driver_cuda_version);

// The version of the NVRTC loaded (nvrtcVersion), e.g. {13, 0}; {0, 0} when none is available.
struct NvrtcVersion {
  int major = 0;
  int minor = 0;
  std::string str() const;    // "13.0", or "unavailable"
  int number() const { return major * 1000 + minor * 10; }  // as cuDriverGetVersion: 13000
};
NvrtcVersion nvrtc_version();

// What the kernel cache keys NVRTC by: its version and the size of the library file loaded,
// "13.0 (109338064 bytes)" (nvrtcVersion gives major.minor only, and patch releases of one
// version may generate other code); the version alone when the size cannot be read.
std::string nvrtc_identity();

// The architectures the loaded NVRTC can target (nvrtcGetSupportedArchs), ascending, e.g.
// {75, 80, ..., 120}. Throws NvrtcUnavailable.
std::vector<int> nvrtc_supported_archs();

// The default options for fusejit's generated kernels. Strict mode: C++17, no FMA contraction
// (contraction changes results, so strict mode forbids it), exact division/sqrt and IEEE denormals
// (`--ftz=false --prec-div=true --prec-sqrt=true`), and -default-device so helpers need no
// __device__. Fast mode permits contraction and approximate math (`--use_fast_math`).
std::vector<std::string> default_compile_options(bool fast_math);

// A CompileError's message holds the whole generated source up to this many lines.
// The options strict mode compiles with (default_compile_options): IEEE results, no contraction,
// no flush to zero, correctly rounded division and square root, so kernels give the reference's
// bits. lib/options.cpp refuses extra options that undo one of them.
inline constexpr std::string_view kStrictFloatOptions[] = {"--fmad=false", "--ftz=false", "--prec-div=true",
                                                           "--prec-sqrt=true"};

inline constexpr int kCompileErrorSourceLines = 400;

// A compilation that NVRTC rejected (or an NVRTC API failure). what() is a complete report:
// the headline, the mapped graph lines, the options, the NVRTC log, and the source with line
// numbers: the whole source up to kCompileErrorSourceLines lines, otherwise the lines around each
// error, or the first 40 when the log names none (a ptxas limit; KernelCache then adds where it
// kept the whole source).
class CompileError : public std::runtime_error {
 public:
  CompileError(std::string message, std::string log, std::vector<std::string> options, std::string source,
               std::vector<std::string> graph_refs)
      : std::runtime_error(std::move(message)), log_(std::move(log)), options_(std::move(options)),
        source_(std::move(source)), graph_refs_(std::move(graph_refs)) {}
  const std::string& log() const { return log_; }
  const std::vector<std::string>& options() const { return options_; }  // as passed to NVRTC
  const std::string& source() const { return source_; }                 // the generated source
  // Graph locations ("graph.txt:5") of the generated lines NVRTC reported, in log order.
  const std::vector<std::string>& graph_refs() const { return graph_refs_; }

 private:
  std::string log_;
  std::vector<std::string> options_;
  std::string source_;
  std::vector<std::string> graph_refs_;
};

// Compiles `source` (program_name names it in NVRTC's messages, e.g. "fj_k_1a2b3c.cu") for
// request.target. Thread-safe. Throws CompileError on a compile failure or NVRTC API error,
// NvrtcUnavailable when NVRTC cannot be loaded.
CompileResult compile_cuda(const std::string& source, const std::string& program_name, const CompileRequest& request);

// `source` with right-aligned 1-based line numbers ("  12 | text"); lines listed in `mark` get a
// '>' marker. If first_line/last_line are given, only that inclusive range is rendered.
std::string number_source_lines(const std::string& source, const std::vector<int>& mark = {}, int first_line = 1,
                                int last_line = -1);

// Lines (1-based) NVRTC's log blames in program `program_name`: "name(LINE): error: ..." entries.
std::vector<int> error_lines_from_log(const std::string& log, const std::string& program_name);

// The graph location on a generated source line: the text inside the last "[FILE:LINE]"
// comment tag on that line (codegen's convention, e.g. `// %5 = add %3, %4  [graph.txt:5]`),
// or "" if the line carries none.
std::string graph_ref_of_line(const std::string& source, int line);

}  // namespace fusejit::jit
