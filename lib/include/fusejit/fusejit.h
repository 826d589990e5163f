// libfusejit: the public C++ API of fusejit, a runtime JIT kernel fuser for NVIDIA GPUs.
//
// A graph of elementwise ops (parsed from text or built with GraphBuilder) is simplified by
// pattern rewrites, partitioned into fusion groups, turned into CUDA C++, compiled with NVRTC for
// the GPU's architecture, cached, and launched through the CUDA Driver API. Without a GPU the same
// generated source runs on the CPU, compiled by the host C++ compiler.
//
// Conventions of this header:
//  - Shapes are row-major (C order) lists of element counts; [] is a 0-d tensor of one element.
//  - Sizes are in bytes, times in milliseconds, bandwidth in GB/s (1e9 bytes per second).
//  - Every function may throw fusejit::Error (see ErrorKind); nothing else escapes, except
//    std::bad_alloc.
//  - The library never writes to stdout or stderr itself: warnings (such as the PTX fallback for a
//    GPU newer than NVRTC) go to the handler set with set_warning_handler().
//  - This header includes only the standard library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fusejit {

/// fusejit's version, "MAJOR.MINOR.PATCH".
std::string_view version();

/// Element types, named as in the graph format. bool is one byte, as in NumPy and PyTorch.
/// f16 is IEEE binary16, bf16 is bfloat16; both are computed in f32 and rounded to
/// nearest-even after every op (strict mode), see docs/ops.md.
enum class DType : uint8_t { Bool, I8, U8, I32, I64, F16, BF16, F32, F64 };

/// "f32", "bf16", ... as written in graph text.
std::string_view dtype_name(DType t);
/// Size of one element in bytes.
std::size_t dtype_size(DType t);

/// What went wrong, so callers can react differently to their own mistakes and to fusejit's.
enum class ErrorKind {
  User,      ///< bad graph text, builder call, dim, param, input file or option
  Compile,   ///< NVRTC or the host compiler rejected generated code (a fusejit bug, or a toolchain issue)
  Driver,    ///< the CUDA driver failed: no driver/device, out of memory, launch failure, too-old driver
  Internal,  ///< a broken invariant inside fusejit: always a bug; please report it
};

/// The one exception type of the library.
class Error : public std::runtime_error {
 public:
  /// `message` is the bare message; `file`/`line`/`column` locate it in graph text when known
  /// (line 0 = no location); `diagnostic` is the rendered form (empty: same as message).
  Error(ErrorKind kind, std::string message, std::string file = {}, int line = 0, int column = 0,
        std::string diagnostic = {});
  ErrorKind kind() const noexcept { return kind_; }
  /// Graph file name ("" when none), 1-based line and column (0 when unknown).
  const std::string& file() const noexcept { return file_; }
  int line() const noexcept { return line_; }
  int column() const noexcept { return column_; }
  /// Ready to print: "FILE:LINE:COL: error: MESSAGE", the offending line and a caret when the error
  /// has a location; otherwise "error: MESSAGE" (with the NVRTC log for compile errors).
  const std::string& diagnostic() const noexcept { return diagnostic_; }

 private:
  ErrorKind kind_;
  std::string file_;
  int line_ = 0;
  int column_ = 0;
  std::string diagnostic_;
};

/// Receives warnings (one complete message per call, no trailing newline). Called from whichever
/// thread hit the condition; must be thread-safe.
using WarningHandler = std::function<void(std::string_view message)>;
/// Sets the process-wide warning handler; an empty handler restores the default, which writes
/// "fusejit: warning: MESSAGE" to stderr.
void set_warning_handler(WarningHandler handler);

/// Named dim values, e.g. {{"N", 1024}}: override the graph's defaults.
using DimValues = std::vector<std::pair<std::string, int64_t>>;

/// A run-time scalar value for a graph param (and a literal for the builder). Integers are kept
/// exactly; it is converted to the param's dtype by the cast rules of docs/ops.md.
struct Scalar {
  enum class Kind : uint8_t { Bool, Int, Float } kind = Kind::Float;
  double f = 0.0;
  int64_t i = 0;
  Scalar() = default;
  Scalar(double v) : kind(Kind::Float), f(v) {}                       // NOLINT: implicit by design
  Scalar(float v) : kind(Kind::Float), f(v) {}                        // NOLINT
  Scalar(int v) : kind(Kind::Int), i(v) {}                            // NOLINT
  Scalar(int64_t v) : kind(Kind::Int), i(v) {}                        // NOLINT
  Scalar(bool v) : kind(Kind::Bool), i(v ? 1 : 0) {}                  // NOLINT
  double as_double() const { return kind == Kind::Float ? f : static_cast<double>(i); }
};

/// A graph input or output as seen by callers.
struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;          ///< current sizes (after dim overrides)
  std::vector<std::string> dim_names;  ///< per dimension: the dim's name, or "" for a literal size
  int64_t elements() const;            ///< product of shape (1 for 0-d)
  int64_t bytes() const;               ///< elements() * dtype_size(dtype)
};

/// A graph param (a 0-d run-time scalar passed to kernels as an argument: a new value never
/// recompiles).
struct ParamInfo {
  std::string name;
  DType dtype = DType::F32;
  Scalar default_value;
};

/// An immutable, verified graph of elementwise ops. Cheap to copy (shared, immutable state).
/// Thread-safe to share between threads.
class Graph {
 public:
  /// Parses graph text (format: docs/graph-format.md). `file` names the text in diagnostics.
  /// Throws Error(User) with file:line:col on any malformed input.
  static Graph parse(std::string_view text, std::string_view file = "<string>", const DimValues& dims = {});
  /// Reads and parses a graph file. Throws Error(User) if it cannot be read or parsed.
  static Graph load(const std::string& path, const DimValues& dims = {});

  /// The same graph with other dim values. Throws Error(User) on an unknown dim, a negative value
  /// or shapes that no longer broadcast.
  Graph with_dims(const DimValues& dims) const;

  std::string name() const;                ///< from `graph NAME`, "" if none
  std::vector<TensorInfo> inputs() const;  ///< in declaration order
  std::vector<TensorInfo> outputs() const; ///< in declaration order
  std::vector<ParamInfo> params() const;   ///< in declaration order
  DimValues dims() const;                  ///< declared dims and their current values
  int op_count() const;                    ///< number of op nodes (inputs, params, constants excluded)
  /// Graph text that parses back to the same graph (the IR dump).
  std::string to_text() const;

  struct Impl;
  explicit Graph(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  const Impl& impl() const { return *impl_; }

 private:
  std::shared_ptr<const Impl> impl_;
};

class GraphBuilder;

/// A value while building a graph: a node of one GraphBuilder, or a weakly typed literal
/// (`2`, `0.5`, `true`) that takes its dtype from the other operand, as a Python scalar does in
/// PyTorch. Literals convert implicitly, so `x * 2.0` and `b.op("maximum", {x, 0})` work.
class Value {
 public:
  Value(double v) : lit_(v) {}   // NOLINT: implicit by design
  Value(int v) : lit_(v) {}      // NOLINT
  Value(int64_t v) : lit_(v) {}  // NOLINT
  Value(bool v) : lit_(v) {}     // NOLINT
  bool is_literal() const { return owner_ == nullptr; }

 private:
  friend class GraphBuilder;
  Value(GraphBuilder* owner, int32_t id) : owner_(owner), id_(id) {}
  GraphBuilder* owner_ = nullptr;
  int32_t id_ = -1;
  Scalar lit_;
  friend Value binary(std::string_view op, const Value& a, const Value& b);
};

/// Applies a binary op by its graph-format name to two values, at least one of them a node.
/// Throws Error(User) if both are literals of no builder, or belong to different builders.
Value binary(std::string_view op, const Value& a, const Value& b);
inline Value operator+(const Value& a, const Value& b) { return binary("add", a, b); }
inline Value operator-(const Value& a, const Value& b) { return binary("sub", a, b); }
inline Value operator*(const Value& a, const Value& b) { return binary("mul", a, b); }
inline Value operator/(const Value& a, const Value& b) { return binary("div", a, b); }

/// A named dimension handle from GraphBuilder::dim().
struct DimRef {
  int32_t index = -1;
};
/// One extent of an input shape: a literal size or a named dim.
struct Extent {
  Extent(int64_t size) : size(size) {}  // NOLINT
  Extent(int size) : size(size) {}      // NOLINT
  Extent(DimRef d) : dim(d.index) {}    // NOLINT
  int64_t size = 1;
  int32_t dim = -1;
};

/// Builds a graph in code; its calls mirror the graph format statement by statement, and a built
/// graph is identical to the parsed text of Graph::to_text(). Names follow the graph format's
/// rules (docs/graph-format.md): a letter or '_' then letters, digits or '_', no reserved word, and
/// one namespace for dims, inputs, params and named values, each name bound once. Not
/// thread-safe. Errors throw Error(User) without a file location, and a refused call changes
/// nothing; after build(), every call (and every Value of this builder) throws Error(User).
/// Values must not outlive their builder.
class GraphBuilder {
 public:
  /// `graph NAME`; "" for none. Throws Error(User) if the name is not a valid name.
  explicit GraphBuilder(std::string graph_name = "");
  ~GraphBuilder();
  GraphBuilder(const GraphBuilder&) = delete;
  GraphBuilder& operator=(const GraphBuilder&) = delete;

  /// `dim NAME = value`
  DimRef dim(const std::string& name, int64_t value);
  /// `input NAME : DTYPE[shape]`
  Value input(const std::string& name, DType dtype, const std::vector<Extent>& shape);
  /// `param NAME : DTYPE = default`
  Value param(const std::string& name, DType dtype, Scalar default_value = Scalar(0.0));
  /// Any op of docs/ops.md by name ("add", "tanh", "where", "clamp", ...), with NumPy broadcasting
  /// and PyTorch promotion. Throws Error(User) on an unknown op, a wrong argument count, or shapes
  /// that do not broadcast.
  Value op(std::string_view name, std::initializer_list<Value> args);
  Value op(std::string_view name, const std::vector<Value>& args);
  /// `cast(x, dtype)`
  Value cast(const Value& x, DType dtype);
  /// `NAME = value`: gives a node a name (shown in generated code and the IR dump). Throws
  /// Error(User) for a literal, an input or param, a value already named, or a name in use.
  void name(const Value& v, const std::string& name);
  /// `output NAME`: marks a value as a graph output named `name` (a new name unless it is the
  /// value's own). Throws Error(User) if it is an input or param (an output must be computed by
  /// the graph), or the name is listed twice or in use.
  void output(const std::string& name, const Value& v);
  /// Verifies and returns the graph; the builder is then empty. Throws Error(User) (e.g. no output).
  Graph build();

  struct Impl;

 private:
  friend Value binary(std::string_view op, const Value& a, const Value& b);
  int32_t node_of(const Value& v);
  std::unique_ptr<Impl> impl_;
};

/// Where kernels run.
enum class Backend {
  Auto,  ///< the GPU when a CUDA driver and device are present, else the CPU
  Cuda,  ///< the GPU through the Driver API; Error(Driver) when unavailable
  Cpu,   ///< the generated CUDA source compiled by the host C++ compiler ($CXX, else c++)
};

/// Which plan to run: fused (one kernel per fusion group) or unfused (one kernel per op node).
enum class PlanKind { Fused, Unfused };

/// Compilation and run options.
struct Options {
  std::string cache_dir;     ///< kernel cache folder; "" = $FUSEJIT_CACHE_DIR, $XDG_CACHE_HOME/fusejit, ~/.cache/fusejit
  bool disk_cache = true;    ///< false: in-memory cache only (FUSEJIT_DISABLE_CACHE=1 also disables it)
  std::string dump_dir;      ///< "" = none; else every kernel's .cu (and .ptx/.cubin) plus index.json is written here
  std::string arch;          ///< "" = from the device; "sm_90" (CUBIN) or "compute_90" (PTX) overrides
  bool fast_math = false;    ///< allow value-changing rewrites, FMA contraction, f32 intermediates for halves
  int device = 0;            ///< CUDA device ordinal (CUDA_VISIBLE_DEVICES is applied by the driver)
  /// Extra NVRTC options appended after fusejit's own for every GPU kernel, fused and unfused
  /// (e.g. "--maxrregcount=32" to trade registers for occupancy; NVRTC docs, "Supported Compile
  /// Options"). Part of the cache key. Options that change results (--use_fast_math) show up in
  /// the strict checks. Ignored, with a warning, on the CPU path.
  std::vector<std::string> nvrtc_options;
  Backend backend = Backend::Auto;
};

/// One compiled kernel of a program.
struct KernelInfo {
  std::string name;          ///< deterministic, derived from the kernel's content
  std::string source;        ///< generated CUDA C++ (the translation unit's kernel part)
  std::vector<std::string> ops;  ///< the op nodes it computes, named as `fusejit plan` names them, e.g. "h = add(x, bias)", "%4 = mul(h, 0.5)"
  int64_t elements = 0;      ///< iteration space size
  int64_t read_bytes = 0;    ///< each input read once
  int64_t write_bytes = 0;   ///< each output written once
  std::string cache;         ///< "compiled", "memory" or "disk": where the binary came from
  double compile_ms = 0.0;   ///< time spent compiling it (0 on a cache hit)
};

/// A graph compiled for one target (device arch or CPU) and mode. Compile once, run many times.
/// Cheap to copy (shared state); launch() and run() may be called concurrently from several
/// threads (on different streams on the GPU).
class Program {
 public:
  /// Rewrites, plans, generates and compiles (or loads from the cache) the fused and the unfused
  /// kernels. Throws Error(User) for bad options, Error(Compile), Error(Driver) when the GPU
  /// backend is requested but unavailable.
  static Program compile(const Graph& graph, const Options& options = {});

  Backend backend() const;               ///< Cuda or Cpu, as decided at compile time
  std::string target() const;            ///< e.g. "sm_90 (CUBIN)", "compute_120 (PTX, JIT-compiled by the driver)", "host C++"
  bool fast_math() const;
  const Graph& graph() const;            ///< the graph as given
  const Graph& rewritten() const;        ///< after rewrites (what the kernels compute)
  std::string rewrite_summary() const;   ///< one line: "rewrites (strict mode): mul-chain x1;" (or "none fired")
  std::string plan_text() const;         ///< fusion groups, traffic and predicted ratio (as `fusejit plan`)
  const std::vector<KernelInfo>& kernels(PlanKind kind) const;

  /// Enqueues the program on the GPU without synchronising. `inputs`: one device pointer per graph
  /// input (declaration order), `outputs`: one per output; all owned by the caller, allocated with
  /// cudaMalloc/cuMemAlloc, C-contiguous, sized for `dims`. `params`: one per graph param (empty =
  /// defaults). `stream`: a CUstream / cudaStream_t (nullptr = the legacy default stream). Uses the
  /// caller's current CUDA context when one is set, else the device's primary context.
  /// The unfused plan allocates its intermediates stream-ordered and frees them on the stream.
  /// Throws Error(User) on a wrong pointer count or an output overlapping an input (as far as
  /// known from the sizes), Error(Driver) on a launch failure. Requires backend() == Cuda.
  void launch(std::span<const void* const> inputs, std::span<void* const> outputs,
              std::span<const Scalar> params = {}, void* stream = nullptr, PlanKind kind = PlanKind::Fused,
              const DimValues& dims = {}) const;

  /// Host-memory convenience for small programs and tests, on either backend: copies inputs in,
  /// runs, copies outputs back, synchronises. Returns one tensor per graph output.
  struct HostTensor {
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    std::vector<std::byte> data;  ///< C order, elements() * dtype_size(dtype) bytes
  };
  std::vector<HostTensor> run(const std::vector<HostTensor>& inputs, std::span<const Scalar> params = {},
                              PlanKind kind = PlanKind::Fused, const DimValues& dims = {}) const;

  struct Impl;
  explicit Program(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  const Impl& impl() const { return *impl_; }

 private:
  std::shared_ptr<const Impl> impl_;
};

using HostTensor = Program::HostTensor;

}  // namespace fusejit
