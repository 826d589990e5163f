// libfusejit: the public C++ API of fusejit, a runtime JIT kernel fuser for NVIDIA GPUs.
//
// A graph of elementwise ops and reductions (parsed from text or built with GraphBuilder) is
// simplified by pattern rewrites, partitioned into fusion groups, turned into CUDA C++, compiled
// with NVRTC for the GPU's architecture, cached, and launched through the CUDA Driver API. Without
// a GPU the same generated source runs on the CPU, compiled by the host C++ compiler.
//
// Conventions of this header:
//  - Shapes are row-major (C order) lists of element counts; [] is a 0-d tensor of one element.
//  - Sizes are in bytes, times in milliseconds, bandwidth in GB/s (1e9 bytes per second).
//  - Every function may throw fusejit::Error (see ErrorKind); nothing else escapes, except
//    std::bad_alloc.
//  - The library never writes to stdout, and to stderr only through warnings: those (such as the
//    PTX fallback for a GPU newer than NVRTC) go to the handler set with set_warning_handler(),
//    whose default writes them to stderr (as does a handler's exception, caught).
//  - This header includes only the standard library.
#pragma once

/// The C++ standard the headers are compiled under (MSVC reports it in _MSVC_LANG).
#ifdef _MSVC_LANG
#define FUSEJIT_CPLUSPLUS _MSVC_LANG
#else
#define FUSEJIT_CPLUSPLUS __cplusplus
#endif
// C++20 (std::span, concepts, char8_t): one clear error for an older standard instead of dozens.
#if FUSEJIT_CPLUSPLUS < 201709L  // GCC 10 says 201709 under -std=c++20
#error "fusejit's headers need C++20 (-std=c++20; CMake: target_compile_features(... cxx_std_20), which fusejit::fusejit carries)"
#else  // the header itself, compiled only then (no cascade of errors after the one above)

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <optional>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace fusejit {

/// fusejit's version, "MAJOR.MINOR.PATCH".
std::string_view version();

/// Element types, named as in the graph format. bool is one byte, as in NumPy and PyTorch.
/// f16 is IEEE binary16, bf16 is bfloat16; both are computed in f32 and rounded to
/// nearest-even after every op (strict mode), see docs/ops.md. A value outside these (an integer
/// cast to DType) is refused with Error(User) by GraphBuilder and HostTensor. F64 stays last.
enum class DType : uint8_t { Bool, I8, U8, I32, I64, F16, BF16, F32, F64 };

/// "f32", "bf16", ... as written in graph text. Error(User) for a value that is not one of DType's
/// enumerators (as dtype_size).
std::string_view dtype_name(DType t);
/// The dtype named `name` as in graph text ("f32", "bf16", ...). Throws Error(User) for any other
/// name, saying how fusejit writes a NumPy or PyTorch name ("float32": f32, "bfloat16": bf16) or
/// which names are close.
DType parse_dtype(std::string_view name);
/// Size of one element in bytes (bool: 1). Throws Error(User) for a value that is none of DType's.
std::size_t dtype_size(DType t);

/// What graph text and GraphBuilder call by `name` (docs/ops.md, docs/graph-format.md): a language
/// binding's hint for a method a value lacks (PyTorch's `x.exp()`) asks here instead of keeping a
/// second list of ops.
/// (`Unknown`, not `None`: X11's headers define None as a macro.)
enum class OpKind : uint8_t {
  Unknown,      ///< no op of that name (and "input", "param", "const": leaves, not calls)
  Elementwise,  ///< GraphBuilder::op's ("exp", "where", "clamp"), and "cast" (GraphBuilder::cast's)
  Reduction,    ///< GraphBuilder::reduce's: a reduction ("sum", "amax") or a composite ("softmax", "var")
};
/// The kind of the op named `name`, exactly as written (case-sensitive); OpKind::Unknown for any
/// other string (no error).
OpKind op_kind(std::string_view name) noexcept;

/// f16 (IEEE binary16) and bf16 (bfloat16) storage bits from and to float, bit for bit as the
/// kernels and the reference evaluator convert (ir/scalar/fj_scalar.h): from float rounds to
/// nearest, ties to even (overflow gives infinity, NaN stays a quiet NaN with its sign); to float
/// is exact.
uint16_t f16_from_float(float x);
float f16_to_float(uint16_t bits);
uint16_t bf16_from_float(float x);
float bf16_to_float(uint16_t bits);

/// What went wrong, so callers can react differently to their own mistakes and to fusejit's.
enum class ErrorKind {
  User,      ///< bad graph text, builder call, dim, param, input file or option
  Compile,   ///< NVRTC or the host compiler rejected generated code (a fusejit bug, or a toolchain issue; or no room to build in $TMPDIR)
  Driver,    ///< the CUDA driver failed: no driver/device, out of memory, launch failure, too-old driver
  Internal,  ///< a broken invariant inside fusejit: always a bug; please report it
};
/// "user", "compile", "driver" or "internal": the `kind` of `fusejit run --json`'s error object
/// and of Python's exceptions. "internal" for a value that is none of ErrorKind's.
std::string_view error_kind_name(ErrorKind kind) noexcept;

/// The one exception type of the library. what() is the bare message, without the location;
/// diagnostic() is what to print for a person (with FILE:LINE:COL, the line and a caret).
class Error : public std::runtime_error {
 public:
  /// `message` is the bare message; `file`/`line`/`column` locate it in graph text when known
  /// (line 0 = no location); `diagnostic` is the rendered form (empty: "error: MESSAGE", without a
  /// location, which only a rendered form passed here carries). In all
  /// three, NUL bytes and bytes that are not UTF-8 (a file name's, an option value's) are stored
  /// as the text "\xNN", so what() and diagnostic() are whole, valid UTF-8.
  Error(ErrorKind kind, std::string message, std::string file = {}, int line = 0, int column = 0,
        std::string diagnostic = {});
  ErrorKind kind() const noexcept { return kind_; }
  /// The file the error is about: the graph's file (or the name it was parsed under, "<string>" by
  /// default, also for a launch argument's error, which has line 0), a .npy file's path, "" for a
  /// GraphBuilder's errors; 1-based line and column (0 when unknown).
  const std::string& file() const noexcept { return file_; }
  int line() const noexcept { return line_; }
  int column() const noexcept { return column_; }
  /// Ready to print: "FILE:LINE:COL: error: MESSAGE", the offending line and a caret when the error
  /// has a location ("FILE:LINE: error: MESSAGE" and the line, no caret, where its column is 0);
  /// otherwise "error: MESSAGE" (with the NVRTC log for compile errors); a long quoted name in
  /// MESSAGE is cut as format_diagnostic cuts it (what() keeps it whole). What
  /// terminal_safe() replaces (an ESC in a file name, a bidirectional override) is '?' in it;
  /// what() keeps it. No trailing newline (as format_diagnostic).
  const std::string& diagnostic() const noexcept { return diagnostic_; }

 private:
  ErrorKind kind_;
  std::string file_;
  int line_ = 0;
  int column_ = 0;
  std::string diagnostic_;
};

/// Renders an error located in a text of the caller's as Error::diagnostic() renders one in graph
/// text: "FILE:LINE:COL: error: MESSAGE", then line `line` (1-based) of `text` with a caret under
/// its byte `column` (1-based; COL counts bytes, as graph diagnostics do; the caret's indent is the
/// columns a terminal gives the characters before it: 2 for East Asian wide characters and emoji,
/// 0 for combining marks, UAX #11); `column` 0: "FILE:LINE: error: MESSAGE" and the line, no caret.
/// What terminal_safe() replaces, in MESSAGE and the line, is shown as '?' (so the diagnostic keeps
/// its lines), a line's bytes that are not UTF-8 too, and a line over 160 bytes is cut to a window
/// around the column, a quoted name (no spaces) of over 160 bytes in MESSAGE to its first and last
/// 35 bytes ('qqq...qqq' (1000 bytes)). The `fusejit` command renders its command line's errors
/// with it. No trailing newline.
std::string format_diagnostic(std::string_view message, std::string_view file, int line, int column,
                              std::string_view text);

/// `text` with what a terminal would act on instead of showing replaced by '?', one '?' per byte:
/// control characters but tab (and line feed where `keep_line_feeds`), DEL, the C1 controls
/// U+0080-U+009F (a terminal may read U+009B as CSI; ECMA-48) and the bidirectional overrides and
/// isolates U+202A-U+202E, U+2066-U+2069, which reorder the text shown ("Trojan Source",
/// CVE-2021-42574). Other bytes, invalid UTF-8 included, are kept. For printing an error that
/// quotes a user's file name or option value; the `fusejit` command prints every error through it.
std::string terminal_safe(std::string_view text, bool keep_line_feeds = false);

/// Receives warnings (one complete message per call, no trailing newline). Called from whichever
/// thread hit the condition (also threads fusejit starts to compile); must be thread-safe. It
/// should not throw: an exception it throws is caught, and the message and the exception's
/// what() go to stderr; the call that warned goes on (a warning never fails a call). NUL and
/// bytes that are not UTF-8 in the message are escaped as in Error.
using WarningHandler = std::function<void(std::string_view message)>;
/// Sets the process-wide warning handler; an empty handler restores the default, which writes
/// "fusejit: warning: MESSAGE" to stderr. Waits for calls of the old handler in progress to
/// return (new calls wait meanwhile): after it returns the old handler is never called again (so
/// what it captured may be freed). Error(User) when called from inside a handler (it would wait
/// for itself). A handler may call fusejit, including functions that warn (on the same thread
/// they reach it directly) and launches of other programs, but must not compile the kernel it is
/// warned about: a handler called during a build runs inside it, holding that kernel's build
/// lock, so compiling the same graph again from the handler waits for itself.
void set_warning_handler(WarningHandler handler);

/// Inside a WarningHandler: the thread whose fusejit call the warning comes from. A compile runs
/// parts on threads of its own; their warnings name the thread that called fusejit, so a handler
/// can hand each warning to the call that caused it (the Python binding raises a warning turned
/// error from that call). Elsewhere: the calling thread's id.
std::thread::id warning_origin();

/// Named dim values, e.g. {{"N", 1024}}: override the graph's defaults. A name given twice takes
/// its last value, as Params does.
using DimValues = std::vector<std::pair<std::string, int64_t>>;

namespace detail {
/// The character types: a character is no value ('a' would silently become 97), so Scalar and
/// Value delete their constructors from them.
template <class C>
inline constexpr bool kCharacter = std::is_same_v<C, char> || std::is_same_v<C, wchar_t> || std::is_same_v<C, char8_t> ||
                                   std::is_same_v<C, char16_t> || std::is_same_v<C, char32_t>;
#ifdef __SIZEOF_INT128__
__extension__ typedef __int128 Int128;            ///< named without -Wpedantic's warning: Value refuses it
__extension__ typedef unsigned __int128 UInt128;  ///< as Int128
#endif
}  // namespace detail

/// A run-time scalar value for a graph param (and a literal for the builder). Integers are kept
/// exactly; it is converted to the param's dtype by the cast rules of docs/ops.md.
struct Scalar {
  enum class Kind : uint8_t { Bool, Int, Float } kind = Kind::Float;  ///< which of f and i holds it
  double f = 0.0;  ///< the value when kind is Float
  int64_t i = 0;   ///< the value when kind is Int or Bool (0 or 1)
  Scalar() = default;  ///< 0.0
  Scalar(double v) : kind(Kind::Float), f(v) {}                       // NOLINT: implicit by design
  Scalar(float v) : kind(Kind::Float), f(v) {}                        // NOLINT
  Scalar(int v) : kind(Kind::Int), i(v) {}                            // NOLINT
  Scalar(int64_t v) : kind(Kind::Int), i(v) {}                        // NOLINT
  /// A Bool, from a bool only (a pointer or member pointer would convert to `true`).
  template <class B, std::enable_if_t<std::is_same_v<B, bool>, int> = 0>
  Scalar(B v) : kind(Kind::Bool), i(v ? 1 : 0) {}  // NOLINT
  /// Any other integer type of at most 64 bits (long long, unsigned, size_t, uint64_t:
  /// `Params{{"n", v.size()}}`): an Int. Throws Error(User) for an unsigned value over INT64_MAX,
  /// as a builder Value of one does (it would wrap).
  template <class I, std::enable_if_t<std::is_integral_v<I> && sizeof(I) <= sizeof(int64_t) && !std::is_same_v<I, bool> &&
                                          !std::is_same_v<I, int> && !std::is_same_v<I, int64_t> && !detail::kCharacter<I>,
                                      int> = 0>
  Scalar(I v)  // NOLINT: implicit by design
      : kind(Kind::Int), i(static_cast<int64_t>(v)) {
    if (std::is_unsigned_v<I> && static_cast<uint64_t>(v) > static_cast<uint64_t>(INT64_MAX))
      throw Error(ErrorKind::User, "Scalar: the unsigned value " + std::to_string(v) + " is past INT64_MAX, the most "
                                   "an integer Scalar holds; pass a double to mean its value as a float");
  }
  /// A string (any pointer) is no value: it would silently become `true`.
  template <class P>
  Scalar(const P*) = delete;
  template <class C, std::enable_if_t<detail::kCharacter<C>, int> = 0>
  Scalar(C) = delete;  ///< a character is no value ('a' would silently become 97)
  /// The value as a double (an integer past 2^53 rounds to nearest).
  double as_double() const { return kind == Kind::Float ? f : static_cast<double>(i); }
};

/// A graph input or output as seen by callers.
struct TensorInfo {
  std::string name;                    ///< as declared in the graph
  DType dtype = DType::F32;            ///< its element type
  std::vector<int64_t> shape;          ///< current sizes (after dim overrides)
  std::vector<std::string> dim_names;  ///< per dimension: the dim's name, or "" for a literal size
  int64_t elements() const;            ///< product of shape (1 for 0-d)
  int64_t bytes() const;               ///< elements() * dtype_size(dtype)
};

/// A graph param (a 0-d run-time scalar passed to kernels as an argument: a new value never
/// recompiles).
struct ParamInfo {
  std::string name;         ///< as declared in the graph
  DType dtype = DType::F32; ///< the dtype a value given for it converts to
  Scalar default_value;     ///< the value it takes when a call gives none
};

/// One node of a graph as the parser or builder made it (topological order: operands always have
/// smaller ids). Every implicit conversion is an explicit "cast" node, so each op's operands
/// already have the dtype it computes in. For tools that translate a graph into another
/// framework's calls (bench/peers.py); the op names and their semantics are docs/ops.md's.
struct NodeInfo {
  int32_t id = 0;                 ///< index in Graph::nodes()
  std::string op;                 ///< "input", "param", "const", or an op name of docs/ops.md ("add", "cast", ...)
  std::string name;               ///< the name the text gave it, "" for a temporary
  DType dtype = DType::F32;       ///< the result dtype (for "cast": the target dtype)
  std::vector<int64_t> shape;     ///< at the graph's current dims
  std::vector<int32_t> operands;  ///< node ids, in the op's argument order
  Scalar value;                   ///< "const": its value, already rounded to `dtype`
  int32_t slot = -1;              ///< "input"/"param": index in inputs()/params(), else -1
  /// Reductions ("sum", "mean", "prod", "amax", "amin", "argmax", "argmin"): the reduced axes of the operand,
  /// ascending and non-negative (all of them for `sum(x)`); empty for every other op.
  std::vector<int64_t> axes;
  bool keepdim = false;           ///< reductions: the reduced axes stay as size-1 dims (PyTorch's keepdim)
  /// "mean" only: the sum is divided by max(0, n - correction), n the reduced element count (0 for
  /// a plain mean; var and std expand into a mean with their correction, docs/ops.md).
  int64_t correction = 0;
  /// "amax"/"amin" only: it starts from its identity, -inf / +inf (NumPy's `initial=`), so zero
  /// elements give that value instead of an error (softmax, log_softmax and logsumexp expand into
  /// such an amax).
  bool initial = false;
};

/// An immutable, verified graph of elementwise ops and reductions. Cheap to copy (shared, immutable state).
/// Thread-safe to share between threads. A move copies (the state is shared and immutable), so a
/// moved-from Graph is still the same graph.
class Graph {
 public:
  Graph(const Graph&) = default;
  Graph(Graph&& o) noexcept : impl_(o.impl_) {}  ///< copies: a moved-from Graph stays usable
  Graph& operator=(const Graph&) = default;
  Graph& operator=(Graph&& o) noexcept {  ///< copies: a moved-from Graph stays usable
    impl_ = o.impl_;
    return *this;
  }

  /// Parses graph text (format: docs/graph-format.md). `file` names the text in diagnostics.
  /// Throws Error(User) with file:line:col on any malformed input.
  static Graph parse(std::string_view text, std::string_view file = "<string>", const DimValues& dims = {});
  /// Reads and parses a graph file. Throws Error(User) if it cannot be read (missing, not a
  /// regular file, e.g. a directory, FIFO or /dev/zero, or over 16 MiB: docs/graph-format.md)
  /// or parsed.
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
  std::vector<NodeInfo> nodes() const;     ///< every node, topological order (see NodeInfo)
  std::vector<int32_t> output_nodes() const;  ///< per output (declaration order): its node's id in nodes()
  /// Graph text that parses back to the same graph (the IR dump).
  std::string to_text() const;

  struct Impl;
  /// fusejit's own: how the library (and its tests) wrap a graph's state (lib/internal.h).
  /// Throws Error(User) for a null `impl`: there is no empty Graph (Graph::parse, Graph::load and
  /// GraphBuilder::build make one).
  explicit Graph(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {
    if (!impl_) throw Error(ErrorKind::User, "Graph: a null state; Graph::parse, Graph::load or GraphBuilder::build make a Graph");
  }
  /// fusejit's own: the graph's internal state, for the library's code (not a stable API).
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
  /// An empty Value, neither a literal nor a graph value: a place for one assigned later
  /// (`Value acc;` before a loop, `std::vector<Value> v(n)`). Passing it to a builder call or an
  /// operator throws Error(User).
  Value() : empty_(true) {}
  Value(double v) : lit_(v) {}  ///< a float literal  // NOLINT: implicit by design
  /// A bool literal, from a bool only (a pointer or member pointer would convert to `true`).
  template <class B, std::enable_if_t<std::is_same_v<B, bool>, int> = 0>
  Value(B v) : lit_(v) {}  // NOLINT
  /// Any integer type of at most 64 bits (int, int64_t, size_t, unsigned, ...) is an integer
  /// literal. Throws Error(User) for an unsigned value over INT64_MAX (no fusejit literal holds it).
  template <class I, std::enable_if_t<std::is_integral_v<I> && sizeof(I) <= sizeof(int64_t) && !std::is_same_v<I, bool> &&
                                          !detail::kCharacter<I>,
                                      int> = 0>
  Value(I v) : lit_(int64_t{0}) {  // NOLINT
    if constexpr (std::is_unsigned_v<I>)
      if (static_cast<uint64_t>(v) > static_cast<uint64_t>(INT64_MAX))
        throw Error(ErrorKind::User, "integer literal " + std::to_string(v) + " is over INT64_MAX");
    lit_ = Scalar(static_cast<int64_t>(v));
  }
  /// An unscoped enum's constant (`enum { kTwo = 2 }`) is an integer literal, as its underlying
  /// integer (as Scalar and Correction take it; a hostile tester's find: it became a float literal,
  /// so an i32 `x * kTwo` was f32).
  template <class E, std::enable_if_t<std::is_enum_v<E> && std::is_convertible_v<E, int64_t>, int> = 0>
  Value(E v) : Value(static_cast<std::underlying_type_t<E>>(v)) {}  // NOLINT
#ifdef __SIZEOF_INT128__
  /// No fusejit literal holds 128 bits (an __int128 would become a float literal). A template of
  /// exact matches: plain overloads made `long double` and `_Float16` ambiguous (a reviewer's find).
  template <class W, std::enable_if_t<std::is_same_v<W, detail::Int128> || std::is_same_v<W, detail::UInt128>, int> = 0>
  Value(W) = delete;
#endif
  /// A string (any pointer) is no value: it would silently become `true`.
  template <class P>
  Value(const P*) = delete;
  template <class C, std::enable_if_t<detail::kCharacter<C>, int> = 0>
  Value(C) = delete;  ///< a character is no value ('a' would silently become 97)
  /// True for a literal (`2`, `0.5`, `true`), false for a graph value or an empty Value.
  bool is_literal() const { return owner_ == nullptr && !empty_; }
  /// A literal's value (what GraphBuilder::op gives for operands that are all literals, folded as
  /// graph text folds them); nullopt for a graph value or an empty Value.
  std::optional<Scalar> literal() const { return is_literal() ? std::optional<Scalar>(lit_) : std::nullopt; }
  /// True for a default-constructed Value nothing was assigned to.
  bool empty() const { return empty_; }

 private:
  friend class GraphBuilder;
  Value(GraphBuilder* owner, uint64_t serial, int32_t id) : owner_(owner), serial_(serial), id_(id) {}
  GraphBuilder* owner_ = nullptr;
  uint64_t serial_ = 0;  ///< the builder's serial: a Value of a builder destroyed since is told apart
  int32_t id_ = -1;
  Scalar lit_;
  bool empty_ = false;
  friend Value binary(std::string_view op, const Value& a, const Value& b);
  friend Value unary(std::string_view op, const Value& a);
};

/// Applies a binary op by its graph-format name to two values, at least one of them a node.
/// Throws Error(User) if both are literals of no builder, or belong to different builders.
Value binary(std::string_view op, const Value& a, const Value& b);
inline Value operator+(const Value& a, const Value& b) { return binary("add", a, b); }
inline Value operator-(const Value& a, const Value& b) { return binary("sub", a, b); }
inline Value operator*(const Value& a, const Value& b) { return binary("mul", a, b); }
inline Value operator/(const Value& a, const Value& b) { return binary("div", a, b); }
/// Applies a one-operand op by its graph-format name to a graph value. Throws Error(User) for a
/// literal (no builder to add it to; negate the number instead).
Value unary(std::string_view op, const Value& a);
inline Value operator-(const Value& a) { return unary("neg", a); }  ///< `neg(a)`

/// The axes of a reduction: one (`-1`), a list (`{0, 2}`, a std::vector), or none given (`{}`: every
/// axis). Negative axes count from the end, as in NumPy and PyTorch.
struct Axes {
  Axes() = default;
  /// Any integer type but bool (`reduce("sum", x, true)` is a mistake for keepdim, not axis 1; a
  /// braced `{true}` is a list of one axis, 1, as C++ converts it).
  /// Throws Error(User) for an unsigned value over INT64_MAX (`size_t(-1)` is no axis -1).
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  Axes(I axis) : list{static_cast<int64_t>(axis)} {  // NOLINT: implicit by design
    if constexpr (std::is_unsigned_v<I>)
      if (static_cast<uint64_t>(axis) > static_cast<uint64_t>(INT64_MAX))
        throw Error(ErrorKind::User, "axis " + std::to_string(axis) + " is over INT64_MAX");
  }
  Axes(std::initializer_list<int64_t> axes) : list(axes) {}   // NOLINT
  Axes(std::vector<int64_t> axes) : list(std::move(axes)) {}  // NOLINT
  std::vector<int64_t> list;  ///< the axes as given (negative count from the end; empty: every axis)
};

/// GraphBuilder::reduce's keepdim: a bool only. `reduce("var", x, -1, 0)`, meant as correction 0,
/// would read the 0 as keepdim = false, so a number does not convert (it does not compile).
struct Keepdim {
  template <class B, std::enable_if_t<std::is_same_v<B, bool>, int> = 0>
  Keepdim(B keep) : value(keep) {}  // NOLINT: implicit by design
  bool value = false;  ///< true: the reduced axes stay as size-1 dims (PyTorch's keepdim)
};

/// GraphBuilder::reduce's correction: an integer (any integer type or unscoped enum, or a
/// std::optional of one), or none (`{}` or std::nullopt: the op's default). A floating-point value,
/// a bool or a character does not convert: `reduce("amax", x, -1, false, -INFINITY)`, meant as
/// `initial`, would read -inf as the correction (it does not compile; `initial` comes sixth).
/// Throws Error(User) for an unsigned value over 2^62 (reduce refuses a correction over 2^62).
struct Correction {
  template <class I>
  static constexpr bool kInteger = std::is_convertible_v<I, int64_t> && !std::is_floating_point_v<I> &&
                                   !std::is_same_v<I, bool> && !std::is_same_v<I, char> && !std::is_same_v<I, wchar_t> &&
                                   !std::is_same_v<I, char8_t> && !std::is_same_v<I, char16_t> &&
                                   !std::is_same_v<I, char32_t> && !std::is_class_v<I>;
  Correction() = default;
  Correction(std::nullopt_t) {}  // NOLINT: implicit by design
  template <class I, std::enable_if_t<kInteger<I>, int> = 0>
  Correction(I n) : value(checked(n)) {}  // NOLINT: implicit by design
  template <class I, std::enable_if_t<kInteger<I>, int> = 0>
  Correction(const std::optional<I>& n) {  // NOLINT: implicit by design
    if (n) value = checked(*n);
  }
  std::optional<int64_t> value;  ///< the correction given, or none

 private:
  template <class I>
  static int64_t checked(I n) {
    if constexpr (std::is_unsigned_v<I>)
      if (static_cast<uint64_t>(n) > (uint64_t{1} << 62))
        throw Error(ErrorKind::User, "correction=" + std::to_string(n) + " is out of range (it is at most 2^62)");
    return static_cast<int64_t>(n);
  }
};

/// A named dimension handle from GraphBuilder::dim(), valid for that builder only (input() refuses
/// a default-constructed one or another builder's).
struct DimRef {
  int32_t index = -1;             ///< the dim's position among the builder's dims (-1: none)
  const void* builder = nullptr;  ///< the state of the builder that made it (identity only)
  uint64_t serial = 0;            ///< that builder's serial: one destroyed since is told apart
};
/// One size of a shape (a HostTensor's, an Extent), from any integer type but bool, so that a
/// braced shape mixing types (`{rows, 4096}` with a size_t `rows`) needs no cast. An unsigned size
/// over INT64_MAX becomes -1, which HostTensor and GraphBuilder::input refuse as a negative size.
struct Size {
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  Size(I n)  // NOLINT: implicit by design
      : value(std::is_unsigned_v<I> && static_cast<uint64_t>(n) > static_cast<uint64_t>(INT64_MAX)
                  ? -1
                  : static_cast<int64_t>(n)) {}
  int64_t value;  ///< the size, -1 for an unsigned one over INT64_MAX
};

/// One extent of an input shape: a literal size or a named dim.
struct Extent {
  /// Any integer type (int, int64_t, size_t, ...), converted as Size.
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  Extent(I n) : size(Size(n).value) {}  // NOLINT
  /// An unscoped enum's constant (`enum { kHeads = 32 }`) is a size too, as its integer (as Value
  /// takes it): without it, `{kHeads, 8}` chose std::vector's (count, value) constructor and
  /// built 32 extents of 8.
  template <class E, std::enable_if_t<std::is_enum_v<E> && std::is_convertible_v<E, int64_t>, int> = 0>
  Extent(E n) : Extent(static_cast<std::underlying_type_t<E>>(n)) {}  // NOLINT
  Extent(DimRef d) : dim(d.index), builder(d.builder), serial(d.serial), named(true) {}  // NOLINT
  int64_t size = 1;               ///< the literal size (when not named)
  int32_t dim = -1;               ///< the named dim's DimRef::index (when named)
  const void* builder = nullptr;  ///< DimRef::builder of a named dim
  uint64_t serial = 0;            ///< DimRef::serial of a named dim
  bool named = false;  ///< made from a DimRef
};

/// Builds a graph in code; its calls mirror the graph format statement by statement, and a built
/// graph is identical to the parsed text of Graph::to_text(). Names follow the graph format's
/// rules (docs/graph-format.md): a letter or '_' then letters, digits or '_', no reserved word, and
/// one namespace for dims, inputs, params and named values, each name bound once. Not
/// thread-safe. Errors throw Error(User) without a file location, and a refused call changes
/// nothing; after build(), every call (and every Value of this builder) throws Error(User), and so
/// does using a Value after its builder is destroyed (even where a new builder took its address).
class GraphBuilder {
 public:
  /// `graph NAME`; "" for none. Throws Error(User) if the name is not a valid name.
  explicit GraphBuilder(std::string graph_name = "");
  /// Its Values and DimRefs are invalid from then on (a call taking one throws Error(User)).
  ~GraphBuilder();
  GraphBuilder(const GraphBuilder&) = delete;
  GraphBuilder& operator=(const GraphBuilder&) = delete;

  /// `dim NAME = value`: a size the tensors of a call may change. Throws Error(User) for a value
  /// below 0, a name that is not valid or already in use.
  DimRef dim(const std::string& name, int64_t value);
  /// `input NAME : DTYPE[shape]`. Throws Error(User) for a name not valid or in use, a DType
  /// value that is none of the enum's, a negative size, a DimRef of another (or a destroyed)
  /// builder.
  Value input(const std::string& name, DType dtype, const std::vector<Extent>& shape);
  /// `param NAME : DTYPE = default`: a 0-d value set per call (Params). Throws Error(User) as
  /// input() does for the name and dtype, and for a default the dtype cannot hold (docs/ops.md).
  Value param(const std::string& name, DType dtype, Scalar default_value = Scalar(0.0));
  /// Any op of docs/ops.md by name ("add", "tanh", "where", "clamp", ...), with NumPy broadcasting
  /// and PyTorch promotion. Operands that are all literals fold as graph text folds them (Python's
  /// arithmetic in f64 / i64, docs/graph-format.md) into a literal Value, weakly typed as they are:
  /// `x + b.op("exp", 1.0)` is `x + exp(1)` in text. Throws Error(User) on an unknown op, a wrong
  /// argument count, or shapes that do not broadcast.
  Value op(std::string_view name, std::initializer_list<Value> args);
  Value op(std::string_view name, const std::vector<Value>& args);
  /// op() with its operands as arguments: `b.op("exp", x)`, `b.op("where", c, x, 0.0)`.
  Value op(std::string_view name, const Value& a) { return op(name, {a}); }
  Value op(std::string_view name, const Value& a, const Value& b) { return op(name, {a, b}); }
  Value op(std::string_view name, const Value& a, const Value& b, const Value& c) { return op(name, {a, b, c}); }
  /// `name(x[, axes][, keepdim][, correction=N | initial=V])`: a reduction ("sum", "mean", "prod", "amax",
  /// "amin", "argmax", "argmin": the i64 index of the first largest / smallest element, a NaN
  /// picked before any number by both, along one axis or, with none, of the flattened tensor) or a composite the builder expands into them ("softmax", "log_softmax", "logsumexp",
  /// "var", "std", "any", "all"), with the graph format's rules (docs/graph-format.md; semantics, result dtypes
  /// and PyTorch sources in docs/ops.md, "Reductions"). `axes` count from the end when negative;
  /// empty reduces every axis (softmax, log_softmax and logsumexp take exactly one). `keepdim`
  /// keeps the reduced axes as size-1 dims (not for softmax and log_softmax). `correction`: mean
  /// (default 0), var and std (default 1, PyTorch's) divide by max(0, n - correction).
  /// `initial` (NumPy's initial=): only -inf for a float amax and +inf for a float amin, their
  /// identities, so a reduction of zero elements gives that value instead of an error. f16/bf16
  /// operands accumulate in f32 and are rounded once. Throws Error(User) for an unknown name, a
  /// bad or repeated axis, an integer operand of mean/var/std/softmax, amax/amin of zero elements
  /// without `initial`, argmax/argmin of zero elements or over several axes, a negative
  /// correction or a correction given to an op other than mean/var/std, and an `initial` given to
  /// another op, to an integer operand, or of another value than those identities:
  /// `b.reduce("sum", x, -1)`, `b.reduce("amax", x, {0, 2}, true)`, `b.reduce("var", x, -1, false, 0)`.
  Value reduce(std::string_view name, const Value& x, const Axes& axes = {}, Keepdim keepdim = false,
               Correction correction = {}, std::optional<double> initial = std::nullopt);
  /// `cast(x, dtype)`, by the cast rules of docs/ops.md. Throws Error(User) for a Value of another
  /// builder or an empty one, a DType value that is none of the enum's.
  Value cast(const Value& x, DType dtype);
  /// `NAME = value`: gives a node a name (shown in generated code and the IR dump). Throws
  /// Error(User) for a literal, an input or param, a value already named, or a name in use.
  void name(const Value& v, const std::string& name);
  /// The dtype and shape of a value of this builder (TensorInfo: `name` is the value's name, ""
  /// when unnamed; `dim_names` name the dims its shape follows). Throws Error(User) for a literal
  /// (its dtype is fixed only by the op it meets) or a value of another builder.
  TensorInfo info(const Value& v);
  /// `output NAME`: marks a value as a graph output named `name`. An unnamed value takes that
  /// name (as `NAME = expr` then `output NAME` in text); a value already named `other` keeps
  /// that name in the graph, and the output `name` is an alias of it (`name = other`, then
  /// `output name`). Throws Error(User) if it is an input or param (an output must be computed
  /// by the graph), or the name is listed twice or in use.
  void output(const std::string& name, const Value& v);
  /// The source location of the nodes the calls after it add (op, reduce, cast): warnings about them, and errors a program raises about them at a launch, then say
  /// "FILE:LINE:COL: " as for a node of graph text. For a tracer: Python's GraphBuilder sets it
  /// from the frame that builds each op. A graph has one file (Graph's, "" until then): the first
  /// location given sets it, and a location in another file leaves the nodes after it unlocated,
  /// as does `line` 0. `column` counts from 1; 0: unknown (the location says FILE:LINE). Errors
  /// a call throws are unlocated still (the caller knows where it is). These locations are no part
  /// of the graph text. The kernels' comments show them as graph text's ("[model.py:12]", the
  /// file's name without its folder); as graph text's, they are in no kernel name nor disk cache
  /// key (code moved in its file keeps its cached kernels); an ahead-of-time folder's `graph_file`
  /// names no such file. Throws Error(User) for a negative line or column, a file name holding a NUL
  /// byte, and after build(), as every call does.
  void set_location(const std::string& file, int line, int column = 0);
  /// Marks `input` (a Value input() returned) as one the graph may leave unused: build() warns
  /// "input '...' is not used by any output" for it no more (Python's fuse makes each array
  /// attribute of a method's object an input, which a trace may not read). The mark is no part
  /// of the graph text (to_text()): a graph parsed from it warns again. Throws Error(User) for a
  /// value that is no input of this builder.
  void allow_unused(const Value& input);
  /// Verifies and returns the graph; the builder is then finished: every later call throws
  /// Error(User) ("already built its graph"). Throws Error(User) (e.g. no output).
  Graph build();
  /// Whether build() has been called (every other call then throws Error(User)): lets a binding
  /// say what a finished builder means to its user (Python's fuse: a value kept past its trace).
  bool built() const noexcept;

  struct Impl;

 private:
  friend Value binary(std::string_view op, const Value& a, const Value& b);
  friend Value unary(std::string_view op, const Value& a);
  int32_t node_of(const Value& v);
  /// v's builder, or nullptr for a literal; Error(User) when that builder no longer exists.
  static GraphBuilder* owner_of(const Value& v);
  std::unique_ptr<Impl> impl_;
  uint64_t serial_ = 0;  ///< unique in the process: its Values carry it (Value::serial_)
};

/// Where kernels run.
enum class Backend {
  Auto,  ///< the GPU when a CUDA driver and device are present, else the CPU
  Cuda,  ///< the GPU through the Driver API; Error(Driver) when unavailable
  Cpu,   ///< the generated CUDA source compiled by the host C++ compiler ($CXX, else c++)
};

/// Which plan to run: fused (one kernel per fusion group) or unfused (one kernel per op node).
enum class PlanKind { Fused, Unfused };

/// Who reads fusejit's messages. Errors and warnings about an option name it as that reader
/// writes it: the API field ("Options::arch"), the `fusejit` command's flag ("--arch") or the
/// Python package's keyword ("arch").
enum class MessageStyle { Api, CommandLine, Python };

/// Compilation and run options.
struct Options {
  std::string cache_dir;     ///< kernel cache folder; "" = $FUSEJIT_CACHE_DIR, $XDG_CACHE_HOME/fusejit, ~/.cache/fusejit
  bool disk_cache = true;    ///< false: in-memory cache only (FUSEJIT_DISABLE_CACHE=1 also disables it; the CPU path then compiles again what no live Program holds)
  /// "" = none; else the folder `fusejit compile` writes (docs/aot.md) is written here at compile()
  /// (made with its missing parents, as mkdir -p):
  /// graph.txt, every kernel of both plans (so the unfused plan is compiled then too) as .cu and, on
  /// the GPU, .cubin or .ptx, and index.json. A folder fusejit did not write is refused (Error(User);
  /// compile_to_dir says which), as `fusejit compile -o` refuses it.
  /// The environment variable FUSEJIT_DUMP_DIR, where this is "", gives every program compile()
  /// builds a folder of its own under it (Program::dump_dir says which).
  std::string dump_dir;
  /// "" = from the device; "sm_90" (CUBIN) or "compute_90" (PTX) overrides. Checked against what
  /// NVRTC supports on every backend (Error(User) when it is invalid; without an NVRTC the CPU
  /// path checks its form only); on the CPU it then has no effect (a warning says so).
  std::string arch;
  bool fast_math = false;    ///< allow value-changing rewrites, FMA contraction, f32 intermediates for halves
  /// CUDA device ordinal (CUDA_VISIBLE_DEVICES is applied by the driver). When the calling thread
  /// has a current CUDA context, fusejit uses it as it is, whatever its device (a warning says so
  /// for a non-zero `device` that differs; 0 is taken for unset). Error(User) for a negative one.
  int device = 0;
  /// Extra NVRTC options appended after fusejit's own for every GPU kernel, fused and unfused
  /// (e.g. "--maxrregcount=32" to trade registers for occupancy; NVRTC docs, "Supported Compile
  /// Options"). Part of the cache key. Checked on every backend, against fusejit's list of the
  /// options it passes on, so a list the CPU path takes also compiles on a GPU; on the CPU path
  /// such a list has no effect (a warning says so). Each is one word, its value in it
  /// ("--maxrregcount=32", not "--maxrregcount" then "32", no blanks; `-Xptxas` may take ptxas's
  /// list as the next one), spelt as NVRTC takes it (--NAME or -ALIAS). Taken: the NVRTC options
  /// that change how a kernel is optimised, debugged or diagnosed (docs/api.md lists them: -G,
  /// -lineinfo, --maxrregcount=N, -Xptxas=..., ...); the float options where they do not loosen
  /// strict mode's math (unless fast_math: --use_fast_math, --fmad=true, --ftz=true,
  /// --prec-div=false, --prec-sqrt=false would end the reference's bits); the launch-bound knob
  /// -DFJ_RED_MIN_BLOCKS=k, k from 1 to 32 (docs/ops.md), and the reduction switches
  /// -DFJ_RED_NO_VECTOR/_NO_KEPT/_NO_GROUPS/_NO_WARP_TREE (the same bits). Refused (Error(User),
  /// naming the reason): options that choose the target (`arch` does, also through ptxas); that
  /// read files (-I, --pre-include, precompiled headers), whose contents the cache key could not
  /// see; other macros (-D, -U: they can rename the preludes' math calls); options that change
  /// what NVRTC writes (-dc, -rdc, -dlto, --optix-ir, -fdevice-syntax-only); --restrict (an
  /// in-place launch aliases an output with an input); report files (--time); values NVRTC
  /// rejects; and any other option, NVRTC's undocumented ones included (--fassociative-math).
  /// Program::load refuses a folder whose index lists such options.
  std::vector<std::string> nvrtc_options;
  Backend backend = Backend::Auto;
  MessageStyle message_style = MessageStyle::Api;  ///< the `fusejit` command sets CommandLine, Python Python
  /// Also compile the unfused plan (one kernel per op, the baseline fusion is measured against) at
  /// compile(). By default it is compiled on its first use (launch, run or measure with
  /// PlanKind::Unfused); until then kernels(PlanKind::Unfused) reports CacheOutcome::NotBuilt.
  bool build_unfused = false;
  /// Blocks per row of reduction kernels (per group of rows side by side in a column kernel;
  /// docs/ops.md, "A row split over blocks"): 0 = the launcher's rule (ir::choose_split: only few
  /// rows of more than 57,344 elements (up to 16 rows; 253,952 up to 512 rows), or fewer than 512
  /// groups of columns longer than 8,192,
  /// split); 1 = never split; N >= 2 = every row in min(N, its chunks) parts (to measure the split
  /// on a GPU). The results are the same bits whatever the value. Error(User) when negative.
  int64_t row_split = 0;
  /// Whether reduction kernels with one block per row keep the row of the inputs their passes
  /// share in shared memory when it fits in row_cache_limit (docs/ops.md, "The row on chip"): the
  /// block copies the row from memory once, every pass reads the copy on chip (on a GPU not for
  /// short rows, at most 2,048 elements and 8 KiB, which L1/L2 serve: ir::kShortRowElements).
  /// false = every pass reads memory (to measure the difference on a GPU). The results are the
  /// same bits either way.
  /// kernels() and measurements count the bytes as the kernels run with this, row_cache_limit and
  /// row_split; plan_text()'s notes describe fusejit's own rules and say when these differ.
  bool row_cache = true;
  /// The most bytes of shared memory per block a row cache may take. 0 = the launcher's rule: on a
  /// GPU, all the shared memory a block may opt in to (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_
  /// BLOCK_OPTIN: 227 KiB on sm_90) but 12 KiB for the kernel's static shared memory; on the CPU path and in
  /// plans made without a GPU, 48 KiB. N > 0: at most N bytes, capped by the GPU's (or by `arch`'s
  /// in plan_graph; a plan's note then names the N asked for) (to measure the trade of fewer blocks
  /// per SM for fewer reads on a GPU). The same bits whatever the value.
  /// Error(User) when negative.
  int64_t row_cache_limit = 0;
};

/// Where a kernel's binary came from.
enum class CacheOutcome : uint8_t {
  Compiled,   ///< compiled (NVRTC or the host C++ compiler) by this call
  MemoryHit,  ///< compiled earlier in this process (CPU path: held by a live Program; docs/api.md, "The kernel cache")
  DiskHit,    ///< loaded from the kernel cache on disk
  Loaded,     ///< loaded from an ahead-of-time folder (Program::load)
  NotBuilt,   ///< not compiled yet: the unfused plan before its first use (name and source empty)
};
/// "compiled", "memory", "disk", "loaded" or "not built", as index.json writes it. Throws
/// Error(User) for a value that is none of the enum's (a cast integer).
std::string_view cache_outcome_name(CacheOutcome outcome);

/// One kernel of a program (one fusion group of its plan). Each kernel has two entry points: `name`
/// for tensors in their canonical layout and `name + "_s"` for strided views; a row reduction kernel
/// that may keep long rows on chip a third, `name + "_l"` (docs/aot.md).
struct KernelInfo {
  std::string name;          ///< deterministic, derived from the kernel's content ("" when not built)
  std::string source;        ///< generated CUDA C++: the kernel alone, without the preludes (fj_scalar.h, fj_reduce.h, fj_kernel.h) that compile_to_dir writes beside each .cu it includes them in; "" when not built
  std::vector<std::string> ops;  ///< the op nodes it computes, named as `fusejit plan` names them, e.g. "h = add(x, bias)", "%4 = mul(h, 0.5)"
  int64_t elements = 0;      ///< iteration space size
  int64_t read_bytes = 0;    ///< each input read once, plus the rows a reduction's passes re-read from memory (not short rows on a GPU, whose re-reads L1/L2 serve)
  int64_t write_bytes = 0;   ///< each output written once
  CacheOutcome cache = CacheOutcome::Compiled;  ///< where the binary came from
  double compile_ms = 0.0;   ///< compile time (0 on a cache hit; counted once for kernels compiled together)
  bool index64 = false;      ///< 64-bit index math (an iteration space of 2^31 elements or more)
};

/// A tensor in host memory that owns its data: dtype, shape and C-order (row-major) storage of
/// elements() * dtype_size(dtype) bytes, 64-byte aligned (so the CPU path's 16-byte vector loads
/// apply). Copying copies the data; moving does not.
class HostTensor {
 public:
  /// An empty f32[0] tensor.
  HostTensor();
  /// A zero-filled tensor. Throws Error(User) on a negative size, or when the byte size overflows
  /// or cannot be allocated (naming the size asked for).
  HostTensor(DType dtype, std::vector<int64_t> shape);
  /// The same from a braced shape of any integer types: `HostTensor(DType::F32, {rows, 4096})`.
  HostTensor(DType dtype, std::initializer_list<Size> shape) : HostTensor(dtype, sizes(shape)) {}
  /// A tensor of `dtype` holding `values` converted as a cast from f32 (docs/ops.md): f16 and
  /// bf16 round to nearest even. Throws Error(User) when values.size() != the shape's elements.
  static HostTensor from_floats(DType dtype, std::vector<int64_t> shape, std::span<const float> values);
  static HostTensor from_floats(DType dtype, std::initializer_list<Size> shape, std::span<const float> values) {
    return from_floats(dtype, sizes(shape), values);
  }
  /// Every element converted to float (exact for bool, i8, u8, f16, bf16 and f32; f64 and large
  /// integers round to nearest).
  std::vector<float> to_floats() const;

  HostTensor(const HostTensor& other);
  HostTensor& operator=(const HostTensor& other);
  /// A moved-from tensor holds no data: bytes() == elements() == 0, its shape() unspecified (a
  /// copy of it is an empty tensor of shape {0}); assign to it before using it again. Moves never
  /// allocate.
  HostTensor(HostTensor&& other) noexcept
      : dtype_(other.dtype_), shape_(std::move(other.shape_)), bytes_(std::exchange(other.bytes_, 0)),
        mem_(std::move(other.mem_)) {}
  HostTensor& operator=(HostTensor&& other) noexcept {
    if (this == &other) return *this;  // self-move would empty the shape and keep the bytes
    dtype_ = other.dtype_;
    shape_ = std::move(other.shape_);
    bytes_ = std::exchange(other.bytes_, 0);
    mem_ = std::move(other.mem_);
    return *this;
  }
  ~HostTensor() = default;

  DType dtype() const { return dtype_; }  ///< its element type
  const std::vector<int64_t>& shape() const { return shape_; }  ///< sizes, row-major; {} = 0-d
  int64_t elements() const;                       ///< product of shape (1 for 0-d)
  std::size_t bytes() const { return bytes_; }    ///< elements() * dtype_size(dtype())
  /// The raw storage, bytes() long: little-endian elements in C order (f16/bf16 as their bits,
  /// bool as one byte 0 or 1). Valid while the tensor lives and is not assigned to.
  std::span<std::byte> data() { return {mem_.get(), bytes_}; }
  std::span<const std::byte> data() const { return {mem_.get(), bytes_}; }
  /// The storage as elements of T (float for f32, uint16_t for f16/bf16 bits, uint8_t or bool for
  /// bool, ...). Throws Error(User) when sizeof(T) != dtype_size(dtype()).
  template <class T>
  std::span<T> values() {
    check_element_size(sizeof(T));
    return {reinterpret_cast<T*>(mem_.get()), bytes_ / sizeof(T)};
  }
  template <class T>
  std::span<const T> values() const {
    check_element_size(sizeof(T));
    return {reinterpret_cast<const T*>(mem_.get()), bytes_ / sizeof(T)};
  }
  /// Same dtype, shape and bytes.
  friend bool operator==(const HostTensor& a, const HostTensor& b);

 private:
  struct Free {
    void operator()(std::byte* p) const noexcept;
  };
  void check_element_size(std::size_t size) const;
  static std::vector<int64_t> sizes(std::initializer_list<Size> shape) {
    std::vector<int64_t> v;
    v.reserve(shape.size());
    for (const Size& s : shape) v.push_back(s.value);
    return v;
  }
  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  std::size_t bytes_ = 0;
  std::unique_ptr<std::byte[], Free> mem_;
};

namespace detail {
template <class T>
inline constexpr bool kOwningTemporary = false;  // a standard container holding its int64_t values
template <class Allocator>
inline constexpr bool kOwningTemporary<std::vector<int64_t, Allocator>> = true;
template <size_t N>
inline constexpr bool kOwningTemporary<std::array<int64_t, N>> = true;
}  // namespace detail

/// A shape or strides argument of TensorView and TensorRef: a view of int64_t values the caller
/// keeps alive: a named std::vector, std::array or C array, a std::span or another contiguous
/// range of int64_t (a view type such as libtorch's IntArrayRef), `{pointer, count}`, a
/// HostTensor's shape(). A temporary std::vector, std::array or braced list is refused when
/// compiling (`TensorRef(p, dtype, shape, std::vector<int64_t>{64, 1})`, `{{64, 1}}`): the view
/// would dangle once the statement ends, and a later launch would read freed memory as strides.
/// Name the values. Not caught: a view made from a temporary (a std::span or `{pointer, count}` of
/// a temporary vector, an explicit std::initializer_list, a member such as `g.inputs()[0].shape`).
struct Dims : std::span<const int64_t> {
  Dims() = default;
  template <std::contiguous_iterator It>
    requires std::same_as<std::iter_value_t<It>, int64_t>
  Dims(It first, size_t count) : std::span<const int64_t>(std::to_address(first), count) {}  // NOLINT
  template <class R>
    requires std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
             std::same_as<std::ranges::range_value_t<R>, int64_t> &&
             (std::is_lvalue_reference_v<R> || !detail::kOwningTemporary<std::remove_cv_t<R>>)
  Dims(R&& r) : std::span<const int64_t>(std::ranges::data(r), std::ranges::size(r)) {}  // NOLINT
  Dims(std::vector<int64_t>&&) = delete;  ///< a temporary: the view would dangle (above)
  template <size_t N>
  Dims(std::array<int64_t, N>&&) = delete;  ///< a temporary: the view would dangle (above)
  template <size_t N>
  Dims(int64_t (&&)[N]) = delete;  ///< a braced list: the view would dangle (above)
  template <size_t N>
  Dims(const int64_t (&&)[N]) = delete;  ///< a braced list: the view would dangle (above)
};

/// A read-only view of host tensor data owned elsewhere (a HostTensor, a NumPy array, a caller's
/// buffer): dtype, shape, strides and the bytes the view spans. `data` starts at element [0, ..., 0]
/// and must hold every element the strides reach: (1 + sum((shape[d] - 1) * strides[d])) *
/// dtype_size(dtype) bytes at least (exactly elements * dtype_size for a C-contiguous view).
/// `strides` are in elements, one per dim, each >= 0 (a dim of size 1, or a view with no elements,
/// may have any stride, a negative one too); empty = C-contiguous. Transposed, sliced and expanded (stride 0) views run without a copy. It
/// owns nothing: shape, strides and data must outlive every use of the view.
struct TensorView {
  DType dtype = DType::F32;           ///< its element type
  std::span<const int64_t> shape;     ///< its sizes, outermost first
  std::span<const std::byte> data;    ///< from element [0, ..., 0] to the last one the strides reach
  std::span<const int64_t> strides;   ///< in elements, one per dim; empty: C-contiguous
  TensorView() = default;
  TensorView(DType dtype_, Dims shape_, std::span<const std::byte> data_, Dims strides_ = {})
      : dtype(dtype_), shape(shape_), data(data_), strides(strides_) {}
  TensorView(const HostTensor& t) : dtype(t.dtype()), shape(t.shape()), data(t.data()) {}  // NOLINT: implicit by design
};

/// A tensor in memory the caller owns, for Program::launch(): device memory on the CUDA backend
/// (cudaMalloc/cuMemAlloc, or any pointer the driver accepts in the current context), host memory
/// on the CPU backend. `data` is the address of element [0, ..., 0] (may be null for a tensor with
/// no elements); `strides` are in elements, one per dim, each >= 0 (a dim of size 1, or a tensor
/// with no elements, may have any stride, a negative one too), empty = C-contiguous. Inputs are only read, unless an output is the same tensor (in
/// place, see Program::launch). It owns nothing: shape and strides must outlive the call, the
/// memory every use of it (on the GPU: until the launch's kernels finish).
struct TensorRef {
  void* data = nullptr;              ///< the address of element [0, ..., 0]
  DType dtype = DType::F32;          ///< its element type
  std::span<const int64_t> shape;    ///< its sizes, outermost first
  std::span<const int64_t> strides;  ///< in elements, one per dim; empty: C-contiguous
  /// The CUDA device ordinal `data` was allocated on, when the caller knows it (a DLPack tensor's
  /// device_id for kDLCUDA, torch's `tensor.device.index`); -1: not known, or memory any device
  /// may read (host, pinned, managed), and not checked. launch() refuses (Error(User)) tensors
  /// that name two devices, and tensors on another device than the context it launches in: a
  /// kernel that reads another GPU's memory without peer access faults (an illegal address, a
  /// sticky error that spoils the context), and PyTorch refuses such mixes as well. Ordinals are
  /// those this process sees (after CUDA_VISIBLE_DEVICES), as the driver's and torch's.
  int device = -1;
  TensorRef() = default;
  TensorRef(void* data_, DType dtype_, Dims shape_, Dims strides_ = {})
      : data(data_), dtype(dtype_), shape(shape_), strides(strides_) {}
  /// An input from a pointer to const: launch() never writes an input that is not also an output.
  TensorRef(const void* data_, DType dtype_, Dims shape_, Dims strides_ = {})
      : data(const_cast<void*>(data_)), dtype(dtype_), shape(shape_), strides(strides_) {}
  /// No memory: for a tensor with no elements.
  TensorRef(std::nullptr_t, DType dtype_, Dims shape_, Dims strides_ = {})
      : dtype(dtype_), shape(shape_), strides(strides_) {}
  /// A host tensor's storage (CPU backend).
  TensorRef(HostTensor& t) : data(t.data().data()), dtype(t.dtype()), shape(t.shape()) {}  // NOLINT: implicit by design
  /// Also from a const HostTensor, so that inputs need no copy; launch() writes a tensor given as
  /// an output, const or not (the caller's to avoid: outputs should be non-const tensors).
  TensorRef(const HostTensor& t)  // NOLINT: implicit by design
      : data(const_cast<std::byte*>(t.data().data())), dtype(t.dtype()), shape(t.shape()) {}
};

/// Values for a graph's params (`param NAME : DTYPE = default` in docs/graph-format.md), by name
/// or by position:
///     p.run(inputs, {{"eps", 1e-5}, {"beta", 0.9}});   // named: any subset, the rest default
///     p.run(inputs, {1e-5, 0.9});                     // positional: every param, declaration order
///     p.run(inputs);                                   // every param at its default
/// Each value is converted to its param's dtype as a default in graph text is (a float to an
/// integer truncates toward zero), and refused when it does not fit (300 for a u8, NaN for an i32,
/// 1e5 for an f16: ir::literal_misfit); unlike a default, a nonzero value that rounds to 0 (1e-8
/// for an f16) is taken, as a decaying rate reaches 0. A name given twice takes its last
/// value. A name the graph does not have, a positional count other than the graph's param count,
/// both forms at once, or a value that does not fit are Error(User) where the values are used.
class Params {
 public:
  Params() = default;  ///< every param at its default
  /// Every param's value, in declaration order.
  Params(std::initializer_list<Scalar> positional) : positional_(positional) {}
  Params(std::vector<Scalar> positional) : positional_(std::move(positional)) {}  // NOLINT: implicit by design
  /// Values by name; the others take their defaults.
  Params(std::initializer_list<std::pair<std::string, Scalar>> named);
  Params(const std::vector<std::pair<std::string, Scalar>>& named);  // NOLINT: implicit by design
  /// Sets a named value (a later set of the same name replaces it). Returns *this.
  Params& set(std::string name, Scalar value);
  bool empty() const { return positional_.empty() && named_.empty(); }  ///< every param at its default
  const std::vector<Scalar>& positional() const { return positional_; }  ///< values by declaration order
  const std::vector<std::pair<std::string, Scalar>>& named() const { return named_; }  ///< values by name

 private:
  std::vector<Scalar> positional_;
  std::vector<std::pair<std::string, Scalar>> named_;  // distinct names, in first-set order
};

/// Options of Program::measure().
struct MeasureOptions {
  int warmup = 3;                  ///< untimed runs before timing (GPU; at least one per buffer set); >= 0
  int repeats = 20;                ///< timed runs; the median is reported; >= 1 (Error(User) otherwise)
  bool copy_baseline = false;      ///< GPU: also time a device-to-device copy of half the bytes the plan moves
  bool keep_intermediates = false; ///< also return the values the plan materialises that are not outputs
};

/// The outcome of Program::measure(): the outputs of a checked run and the timing of repeated runs.
struct Measurement {
  /// One per graph output, from the first run. Their buffers are filled with 0xFF bytes (NaN for
  /// every float dtype) before it, so an element no kernel wrote cannot pass a check.
  std::vector<HostTensor> outputs;
  /// With MeasureOptions::keep_intermediates: every value the plan materialises that is not a
  /// graph output (for the unfused plan: every op's value), as (N, value) for node id N (named %N in
  /// KernelInfo::ops unless the graph names it), ascending N; poisoned before the run like outputs.
  std::vector<std::pair<int32_t, HostTensor>> intermediates;
  /// Kernel launches per run: one per fusion group with at least one element, one per phase
  /// (2 to 5 or more) for a reduction whose few long rows split over blocks (docs/ops.md, "A row
  /// split over blocks").
  int kernels = 0;
  /// Bytes one run moves: per kernel, each input read once (and again by each later pass over
  /// rows not kept on chip: KernelInfo::read_bytes), each output written once.
  int64_t bytes = 0;
  double median_ms = 0;       ///< median time of one run (GPU: CUDA events; CPU: steady clock around the launches)
  double min_ms = 0, max_ms = 0;  ///< the fastest and slowest timed run, in milliseconds
  double gbps = 0;            ///< bytes / median time, 1e9 bytes per second
  double copy_gbps = 0;       ///< with MeasureOptions::copy_baseline on the GPU: the copy's bandwidth (reads + writes)
  int buffer_sets = 1;        ///< GPU: input/output sets rotated between timed runs so they do not hit in L2
  bool l2_resident = false;   ///< GPU: even the rotated sets fit in ~4x L2: the times flatter DRAM bandwidth
};

/// A graph compiled for one target (device arch or CPU) and mode. Compile once, run many times, at
/// any dim values: sizes, strides and params are kernel arguments (docs/api.md, "What makes a new
/// kernel"). Cheap to copy (shared state). Thread-safe: launch(), run(), measure() and every
/// accessor may be called concurrently from several threads (on the GPU, each launch on the
/// caller's stream; two launches writing the same output buffer concurrently race as any two
/// kernels would). A move copies (the state is shared), so a moved-from Program is still the
/// same program.
class Program {
 public:
  Program(const Program&) = default;
  Program(Program&& o) noexcept : impl_(o.impl_) {}  ///< copies: a moved-from Program stays usable
  Program& operator=(const Program&) = default;
  Program& operator=(Program&& o) noexcept {  ///< copies: a moved-from Program stays usable
    impl_ = o.impl_;
    return *this;
  }

  /// Rewrites, plans, generates and compiles (or loads from the cache) the fused kernels, and the
  /// unfused ones too with Options::build_unfused or a dump folder (Options::dump_dir, else
  /// FUSEJIT_DUMP_DIR's for this program: docs/aot.md), else on their first use. Throws
  /// Error(User) for bad options (an invalid Options::arch on any backend) or a dump folder that
  /// cannot be written, Error(Compile), Error(Driver) when the GPU backend is requested but
  /// unavailable.
  static Program compile(const Graph& graph, const Options& options = {});

  /// Loads a folder written by `fusejit compile GRAPH --arch sm_XY -o DIR` (compile_to_dir): the
  /// graph, its plans and every kernel's CUBIN or PTX, checked against index.json (format:
  /// docs/aot.md). Needs the CUDA driver, not NVRTC: nothing is compiled unless a launch needs a
  /// kernel the folder lacks (the 64-bit-index variant for an iteration space of 2^31 elements or
  /// more, or a dims set whose broadcasts change the plan), which then needs NVRTC (Error(Compile)
  /// naming the kernel and what to install when it is missing). `options` supplies device, cache,
  /// message style and warnings; the target, fast-math mode and NVRTC options come from the
  /// folder. The index, graph.txt and the fused plan's kernels and binaries are checked before a
  /// GPU is looked for (the unfused plan's on its first use on a GPU); with Options::backend =
  /// Backend::Cpu the folder's graph then runs on the CPU path in the folder's mode, compiled as
  /// compile() does (the binaries are not used, so the unfused plan's are never read;
  /// Options::dump_dir and FUSEJIT_DUMP_DIR are ignored, as on the GPU).
  /// KernelInfo::cache is CacheOutcome::Loaded on the GPU. Throws Error(User) for a missing or
  /// malformed folder (docs/aot.md, "What loading checks"), one written by another code generator
  /// version, or whose kernels are not the ones this fusejit generates for its graph.txt (their
  /// names, hashes of the source, NVRTC options or argument lists differ: graph.txt or index.json
  /// was edited, or written by another dump), a binary for another GPU; Error(Driver) with no
  /// usable GPU (unless Backend::Cpu).
  static Program load(const std::string& dir, const Options& options = {});

  Backend backend() const;               ///< Cuda or Cpu, as decided at compile time
  std::string target() const;            ///< e.g. "sm_90 (CUBIN)", "compute_120 (PTX, JIT-compiled by the driver)", "host C++ (...)"
  std::string device() const;            ///< e.g. "NVIDIA H200 (sm_90, 132 SMs)", or "host CPU"
  std::string driver_version() const;    ///< e.g. "CUDA 12.4"; "" on the CPU
  std::string backend_note() const;      ///< why the CPU was used under Backend::Auto ("no GPU: ..."), else ""
  /// The folder compile() wrote this program's kernels to (docs/aot.md): Options::dump_dir, else,
  /// with the environment variable FUSEJIT_DUMP_DIR set, its subfolder `<graph name>-<16 hex
  /// digits>` for this program; "" for none (and for a loaded program).
  std::string dump_dir() const;
  bool fast_math() const;                ///< compiled with Options::fast_math (rewrites and NVRTC flags that may change bits)
  const Graph& graph() const;            ///< the graph as given
  const Graph& rewritten() const;        ///< after rewrites (what the fused kernels compute)
  std::string rewrite_summary() const;   ///< one line, e.g. "rewrites (strict mode): mul-chain x1, dead-code x3" (or "...: none fired")
  /// Fusion groups, traffic and predicted ratio (as `fusejit plan`), at the compiled dims (graph()'s).
  /// A launch at other dim values runs the same kernels with the grid, row split and row cache it
  /// chooses for those values; `fusejit plan --dim` or compile(graph().with_dims(...)) shows them.
  std::string plan_text() const;
  /// One entry per fusion group of the plan, plan order, at the compiled dims; their read_bytes +
  /// write_bytes summed is the traffic of one run. A snapshot: the unfused plan's entries say
  /// CacheOutcome::NotBuilt until it is first used (or built by Options::build_unfused).
  /// Error(User) for a `kind` that is neither Fused nor Unfused (a cast integer).
  std::vector<KernelInfo> kernels(PlanKind kind) const;
  /// The kernels built after compile() for dim values the compiled kernels do not cover (a 64-bit-
  /// index variant, or a plan made again where a broadcast changes; docs/api.md), in build order.
  /// A 64-bit-index variant's entries (index64) keep the sizes and bytes of the graph's own dims:
  /// it runs every size that needs it, so no one size is its own.
  std::vector<KernelInfo> specializations() const;

  /// Tensors given by name, in the order run(), measure() and launch() take them (the graph's
  /// declaration order), so that two inputs of one shape cannot be swapped unnoticed:
  ///     p.run(p.inputs_by_name<fusejit::TensorView>({{"gate", g}, {"up", u}}));
  ///     p.launch(p.inputs_by_name<fusejit::TensorRef>({{"x", x}, {"w", w}}),
  ///              p.outputs_by_name<fusejit::TensorRef>({{"y", y}}));
  /// T: TensorView or TensorRef (a HostTensor converts to either); the tensors are copied as views.
  /// Throws Error(User) for a name the graph has no input (output) of, listing them, a name given
  /// twice, or an input (output) left out.
  template <class T>
  std::vector<T> inputs_by_name(std::initializer_list<std::pair<std::string_view, T>> named) const {
    return in_graph_order(named, false);
  }
  /// inputs_by_name() for the outputs launch() writes.
  template <class T>
  std::vector<T> outputs_by_name(std::initializer_list<std::pair<std::string_view, T>> named) const {
    return in_graph_order(named, true);
  }

  /// Runs the program on tensors the caller owns, dims taken from their shapes.
  ///   inputs:  one per graph input (declaration order), of the input's dtype and a shape the graph
  ///            allows (named dims bound by the first input naming them, literal sizes as declared);
  ///   outputs: one per graph output, of its dtype and the shape the inputs give;
  ///   params:  named or positional (see Params; {} = the defaults);
  ///   stream:  CUDA backend: a CUstream / cudaStream_t (nullptr = the legacy default stream,
  ///            also in code built with --default-stream per-thread: pass
  ///            cudaStreamPerThread (CU_STREAM_PER_THREAD) for that thread's stream), of the
  ///            context the launch runs in (a stream of another context fails in the driver),
  ///            enqueued without synchronising; CPU backend: ignored, runs before returning.
  /// In place: an output may be the same tensor as an input (same data, dtype, shape and strides)
  /// when the plan reads that input for the last time in the kernel that writes the output, or
  /// earlier, and that kernel writes it element by element (a row value written once per row of a
  /// reduction kernel while the row's threads still read the input is refused: docs/api.md); every
  /// other output sharing a byte with an input or another output is refused. Views
  /// that interleave without sharing a byte (the two halves of each row) run: the check is exact
  /// (jit/overlap.h), and a layout it cannot decide within a bound counts as sharing.
  /// On the GPU the caller's current CUDA context is used (else the device's primary context);
  /// each context loads the modules once, at its first launch. After that, a launch issues only
  /// cuLaunchKernel on `stream` (plus cuCtxGetCurrent and cuCtxGetId), so it may be captured into a
  /// CUDA graph, except: a plan with intermediates (the unfused plan; a fused plan of several
  /// kernels) allocates them with cuMemAllocAsync/cuMemFreeAsync on the stream (on a device without
  /// memory pools, cuMemAlloc and a synchronised cuMemFree: not capturable), a reduction whose rows
  /// split over blocks (at these dims) launches once per phase and allocates its workspace in the
  /// same way, an output repeating another
  /// output's value is copied with cuMemcpyDtoDAsync, and the first launch at a new set of dim
  /// values may compile (docs/api.md, "CUDA graphs, streams and threads"). Tensors with no elements launch nothing.
  /// Throws Error(User) on a wrong count, dtype or shape (naming the tensor, as run() does), a bad
  /// param, an overlap (naming both tensors), an output that repeats another's value (`z = y`,
  /// both outputs) where either is not C-contiguous (on both backends: the value is copied as
  /// bytes), a negative stride on a dim of more than one element
  /// (any stride is taken on a dim of size 1 or a tensor without elements), or (CUDA backend) a data pointer
  /// that is no multiple of its element size (a GPU faults on it: CUDA_ERROR_MISALIGNED_ADDRESS);
  /// Error(Driver) on a launch failure; Error(Compile) when a new kernel is needed and cannot be
  /// compiled.
  void launch(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs, const Params& params = {},
              void* stream = nullptr, PlanKind kind = PlanKind::Fused) const;
  void launch(std::initializer_list<TensorRef> inputs, std::initializer_list<TensorRef> outputs,
              const Params& params = {}, void* stream = nullptr, PlanKind kind = PlanKind::Fused) const;

  /// The shape of each graph output (declaration order; dtypes as graph().outputs()) that launch()
  /// expects for inputs of these dtypes and shapes (only dtype and shape are read: data may be
  /// null, device is not read). Checks their dtypes and shapes as launch() does (Error(User) naming
  /// the input). For a caller that allocates the outputs, e.g. a Python binding; the first call
  /// at a new set of dim values makes its launch state, as a launch would.
  std::vector<std::vector<int64_t>> output_shapes(std::span<const TensorRef> inputs, PlanKind kind = PlanKind::Fused) const;
  /// output_shapes() of a braced list, as launch() takes one: `p.output_shapes({x, w})`.
  std::vector<std::vector<int64_t>> output_shapes(std::initializer_list<TensorRef> inputs,
                                                  PlanKind kind = PlanKind::Fused) const;

  /// launch() for C-contiguous device buffers at given dims: `inputs` one device pointer per graph
  /// input (declaration order), `outputs` one per output, sized for `dims` ({} = the compiled
  /// ones). Requires backend() == Cuda. Same rules and errors as launch() above.
  void launch(std::span<const void* const> inputs, std::span<void* const> outputs, const Params& params = {},
              void* stream = nullptr, PlanKind kind = PlanKind::Fused, const DimValues& dims = {}) const;

  /// Host-memory convenience for small programs and tests, on either backend: runs and returns one
  /// tensor per graph output. `inputs`: one view per graph input (declaration order) of the input's
  /// dtype, any strides; the values of the graph's dims are taken from their shapes (so a graph
  /// compiled with T = 4096 runs T = 1 without other arguments or a new kernel). On the CPU the
  /// views are read in place; on the GPU they are copied in (and the outputs back) and the call
  /// synchronises. Throws Error(User) on a wrong tensor count, dtype or shape, naming shapes:
  /// "input 'a': expected bf16[16, 4], got bf16[4, 16]"; dims that two inputs give different
  /// values; data too small for the view; or a bad param.
  std::vector<HostTensor> run(std::span<const TensorView> inputs, const Params& params = {},
                              PlanKind kind = PlanKind::Fused) const;
  std::vector<HostTensor> run(std::initializer_list<TensorView> inputs, const Params& params = {},
                              PlanKind kind = PlanKind::Fused) const;
  std::vector<HostTensor> run(std::span<const HostTensor> inputs, const Params& params = {},
                              PlanKind kind = PlanKind::Fused) const;

  /// Runs the plan on host inputs as run() does (same checks, dims from the shapes). On the GPU:
  /// once checked (outputs poisoned first, see Measurement), then `options.warmup` untimed runs
  /// and `options.repeats` timed ones; the inputs are copied to the device once, device buffer
  /// sets are rotated between runs so small working sets do not hit in L2, and the times are CUDA
  /// event times of the kernels alone. On the CPU: `options.repeats` runs (no warm-up), each timed
  /// by the steady clock around its launches, the first of them the checked one. All memory it
  /// allocates is freed before it returns.
  Measurement measure(std::span<const TensorView> inputs, const Params& params = {}, PlanKind kind = PlanKind::Fused,
                      const MeasureOptions& options = {}) const;
  Measurement measure(std::initializer_list<TensorView> inputs, const Params& params = {},
                      PlanKind kind = PlanKind::Fused, const MeasureOptions& options = {}) const;

  struct Impl;
  /// fusejit's own: how the library (and its tests) wrap a compiled program's state
  /// (lib/program_impl.h). Throws Error(User) for a null `impl`: there is no empty Program
  /// (Program::compile and Program::load make one; a std::optional<Program> holds a place for one).
  explicit Program(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {
    if (!impl_) throw Error(ErrorKind::User, "Program: a null state; Program::compile or Program::load make a Program");
  }
  /// fusejit's own: the program's internal state, for the library's code (not a stable API).
  const Impl& impl() const { return *impl_; }

 private:
  /// For each graph input (outputs: output), in declaration order, the index of its name in
  /// `names`; Error(User) as inputs_by_name().
  std::vector<size_t> positions_of(std::span<const std::string_view> names, bool outputs) const;
  template <class T>
  std::vector<T> in_graph_order(std::initializer_list<std::pair<std::string_view, T>> named, bool outputs) const {
    std::vector<std::string_view> names;
    for (const auto& n : named) names.push_back(n.first);
    std::vector<T> ordered;
    for (size_t k : positions_of(names, outputs)) ordered.push_back(std::data(named)[k].second);
    return ordered;
  }
  std::shared_ptr<const Impl> impl_;
};

}  // namespace fusejit

#endif  // C++20
