// The `fusejit._fusejit` extension: a thin nanobind layer over the public C++ API
// (lib/include/fusejit/). Tensors arrive as nb::ndarray (NumPy through the buffer protocol,
// PyTorch, CuPy and others through DLPack), are described to Program::launch() as TensorRefs
// (data pointer, dtype, shape, strides in elements: no copy), and every compile and launch runs
// with the GIL released. Array allocation, argument binding and streams live in the Python layer
// (python/fusejit/__init__.py), which knows the frameworks.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <pthread.h>
#include <unistd.h>

#include "fusejit/fusejit.h"
#include "fusejit/report.h"
#include "module.h"

namespace nb = nanobind;
using namespace nb::literals;
using fusejit::DType;

namespace {
// Python exceptions raised by the warning handler (warnings filtered to "error"), which cannot
// throw through fusejit: kept by the thread whose call caused them (fusejit::warning_origin(),
// also for a compile worker's warning) and raised when that call's WarningScope ends. Touched only
// with the GIL held. Never destroyed: a python_error left at exit must not be released after
// Python is finalised.
std::unordered_map<std::thread::id, nb::python_error>& pending_warning_errors =
    *new std::unordered_map<std::thread::id, nb::python_error>;

// The threading ident of each thread that made a binding call (WarningScope), so a compile
// worker's warning can name the line of the call it works for. Touched only with the GIL held;
// never destroyed, as pending_warning_errors. A thread id reused by a new thread is registered
// again by that thread's first call.
std::unordered_map<std::thread::id, unsigned long>& caller_idents = *new std::unordered_map<std::thread::id, unsigned long>;

// GilRelease's gate. Leaked: a thread may wait on it while static destructors run at exit.
struct GilGate {
  std::mutex m;
  std::condition_variable cv;
  bool closed = false;
  std::set<pid_t> doomed;  // threads alive when the atexit hook ran, but the hook's own
  int taking = 0;          // threads past the gate, taking the GIL back
};
GilGate* gil_gate_now = new GilGate;
GilGate& gate() { return *gil_gate_now; }

bool python_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

// The kernel's ids of this process's threads (Linux: /proc/self/task), but the calling one's.
std::set<pid_t> other_threads() {
  std::set<pid_t> ids;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/self/task", ec), end; !ec && it != end; it.increment(ec))
    if (const pid_t id = static_cast<pid_t>(std::atol(it->path().filename().c_str())); id > 0) ids.insert(id);
  ids.erase(static_cast<pid_t>(::gettid()));
  return ids;
}

// fork(): the child has only the thread that forked. Threads that were taking the GIL back in the
// parent would hold `taking` above 0 there for ever (the child's exit would wait for them), and
// the objects the other threads' frames held are never released there: no leaks to report. (The
// library's own renewals: jit/fork.h; this one also needs a prepare handler.)
bool g_threads_at_fork = false;
[[maybe_unused]] const int gil_gate_fork_safe = pthread_atfork(
    [] { g_threads_at_fork = !other_threads().empty(); }, nullptr, [] {
      gil_gate_now = new GilGate;
      if (g_threads_at_fork) nb::set_leak_warnings(false);
    });
}  // namespace

fusejit_py::GilRelease::GilRelease() : state_(PyEval_SaveThread()) {}

fusejit_py::GilRelease::~GilRelease() {
  {
    std::unique_lock lock(gate().m);
    // A thread that was running when the hook ran (a daemon thread, in a loop of calls) may be
    // taking the GIL back when finalisation begins; one started later (by a later atexit handler)
    // passes unless finalisation has begun (a small window remains for it, as without fusejit).
    if (gate().closed && (gate().doomed.count(static_cast<pid_t>(::gettid())) || python_finalizing())) {
      nb::set_leak_warnings(false);  // what this thread's frames hold is never released: no leak
      for (;;) gate().cv.wait(lock);  // the process is exiting; Python 3.14 waits the same way
    }
    ++gate().taking;
  }
  PyEval_RestoreThread(state_);
  std::lock_guard lock(gate().m);
  --gate().taking;
  gate().cv.notify_all();
}

void fusejit_py::close_gil_gate() {
  PyThreadState* state = PyEval_SaveThread();  // the threads taking the GIL back need it
  {
    std::unique_lock lock(gate().m);
    gate().closed = true;
    gate().doomed = other_threads();
    gate().cv.wait(lock, [] { return gate().taking == 0; });
  }
  PyEval_RestoreThread(state);  // not finalising yet: atexit hooks run before that begins
}

fusejit_py::WarningScope::WarningScope() {
  thread_local bool registered = false;
  if (!registered) {
    caller_idents[std::this_thread::get_id()] = PyThread_get_thread_ident();
    registered = true;
  }
}

fusejit_py::WarningScope::~WarningScope() noexcept(false) {
  const auto it = pending_warning_errors.find(std::this_thread::get_id());
  if (it == pending_warning_errors.end()) return;
  nb::python_error e = std::move(it->second);
  pending_warning_errors.erase(it);
  if (!std::uncaught_exceptions()) throw e;  // else the error on its way wins
}

fusejit::DType fusejit_py::parse_dtype(std::string_view name) { return fusejit::parse_dtype(name); }

namespace {

using fusejit_py::parse_dtype;

using InArray = nb::ndarray<nb::ro>;
using OutArray = nb::ndarray<>;

using fusejit_py::released;
using fusejit_py::WarningScope;

// The fusejit dtype of a DLPack dtype; `as` (a dtype name) reinterprets 16-bit unsigned storage as
// bf16 or f16, for NumPy arrays of ml_dtypes.bfloat16 that the Python layer views as uint16.
// "input 'x'" / "output 'y'" for messages, made only when one is thrown (a call costs a few
// microseconds; the graph's descriptions are copies).
struct TensorName {
  const fusejit::Program& p;
  bool output;
  size_t k;
  std::string operator()() const {
    const std::vector<fusejit::TensorInfo> info = output ? p.graph().outputs() : p.graph().inputs();
    return std::string(output ? "output '" : "input '") + (k < info.size() ? info[k].name : std::to_string(k)) + "'";
  }
};

DType dtype_of(nb::dlpack::dtype t, const std::optional<std::string>& as, const TensorName& what) {
  using C = nb::dlpack::dtype_code;
  const auto code = static_cast<C>(t.code);
  if (as && code == C::UInt && t.bits == 16 && t.lanes == 1) {
    DType d = parse_dtype(*as);
    if (d == DType::BF16 || d == DType::F16) return d;
  }
  if (t.lanes == 1) {
    if (code == C::Bool && t.bits == 8) return DType::Bool;
    if (code == C::Int && t.bits == 8) return DType::I8;
    if (code == C::Int && t.bits == 32) return DType::I32;
    if (code == C::Int && t.bits == 64) return DType::I64;
    if (code == C::UInt && t.bits == 8) return DType::U8;
    if (code == C::Float && t.bits == 16) return DType::F16;
    if (code == C::Float && t.bits == 32) return DType::F32;
    if (code == C::Float && t.bits == 64) return DType::F64;
    if (code == C::Bfloat && t.bits == 16) return DType::BF16;
  }
  // NumPy's name of the element type (int16, uint32, complex64, ...) where DLPack's code has one.
  static const char* const kKinds[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  const std::string type = (t.code < std::size(kKinds) ? std::string(kKinds[t.code]) : "DLPack code " + std::to_string(t.code)) +
                           std::to_string(t.bits) + (t.lanes == 1 ? "" : " x" + std::to_string(t.lanes));
  throw fusejit::Error(fusejit::ErrorKind::User,
                       what() + ": unsupported element type " + type + "; fusejit takes bool, i8, u8, i32, i64, f16, "
                           "bf16, f32 and f64" +
                           (code == C::UInt && t.bits == 16
                                ? " (bf16 or f16 bits held as uint16: pass a.view(ml_dtypes.bfloat16) or "
                                  "a.view(np.float16))"
                                : ""));
}

// The DLPack device types fusejit reads (dlpack.h's DLDeviceType): host memory, one GPU's memory,
// and pinned or managed memory (which every GPU reads; a CPU program takes host memory only,
// pinned included: see launch()). Any other (0 is none, ROCm, Vulkan, ...) would be read at an
// address no kernel here can use.
void check_device_type(int type, const TensorName& what) {
  if (type == nb::device::cpu::value || type == nb::device::cuda::value || type == nb::device::cuda_host::value ||
      type == nb::device::cuda_managed::value)
    return;
  throw fusejit::Error(fusejit::ErrorKind::User,
                       what() + ": on DLPack device type " + std::to_string(type) +
                           ", which fusejit does not read (it reads kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3 and "
                           "kDLCUDAManaged = 13)");
}

// A tensor in device memory (DLPack device type `type`: CUDA or managed) given to a CPU program.
[[noreturn]] void refuse_on_cpu(const TensorName& what, int type) {
  const fusejit::Program& p = what.p;
  throw fusejit::Error(
      fusejit::ErrorKind::User,
      what() + (type == nb::device::cuda_managed::value ? ": in CUDA managed memory" : ": in GPU memory") +
          ", but this program runs on the CPU (" +
          (p.backend_note().empty() ? std::string("backend=\"cpu\" was asked for") : p.backend_note()) +
          "); pass host arrays (NumPy, tensors on the CPU device, or pinned host memory)");
}

// Views of caller arrays as the launch API sees them. Shapes and strides are owned here, so the
// TensorRefs stay valid while this lives.
struct Tensors {
  std::vector<std::vector<int64_t>> shapes, strides;
  std::vector<fusejit::TensorRef> refs;
  int device_type = 0;  // DLPack device type shared by all (0 = none seen yet)
  int32_t device_id = 0;  // and device ordinal: tensors on two GPUs cannot meet in one launch

  template <class Array>
  void add(const Array& a, const std::optional<std::string>& as, const TensorName& what, bool writable) {
    std::vector<int64_t> shape(a.ndim()), stride(a.ndim());
    for (size_t d = 0; d < a.ndim(); ++d) {
      shape[d] = static_cast<int64_t>(a.shape(d));
      stride[d] = a.stride(d);
    }
    check_device_type(a.device_type(), what);
    // Pinned memory is host memory: a CPU program reads it as it reads NumPy's (a GPU program
    // reads it in place, through its device address).
    const int type = a.device_type() == nb::device::cuda_host::value && what.p.backend() == fusejit::Backend::Cpu
                         ? nb::device::cpu::value
                         : a.device_type();
    // A CPU program first: with device and host arrays mixed, "another kind of device" would not
    // say which is wrong.
    if (what.p.backend() == fusejit::Backend::Cpu && type != nb::device::cpu::value) refuse_on_cpu(what, type);
    if (device_type && type != device_type)
      throw fusejit::Error(fusejit::ErrorKind::User, what() + ": on another kind of device than the tensors before it");
    // Host memory's device_id means nothing (DLPack: 0 for kDLCPU; not every producer says so).
    if (device_type == nb::device::cuda::value && a.device_id() != device_id)
      throw fusejit::Error(fusejit::ErrorKind::User, what() + ": on device " + std::to_string(a.device_id()) +
                                                         ", the tensors before it on device " + std::to_string(device_id) +
                                                         " (one launch runs on one GPU)");
    device_type = type;
    device_id = a.device_id();
    shapes.push_back(std::move(shape));
    strides.push_back(std::move(stride));
    refs.emplace_back(writable ? const_cast<void*>(static_cast<const void*>(a.data())) : a.data(),
                      dtype_of(a.dtype(), as, what), shapes.back(), strides.back());
    // Device memory of one GPU: launch() checks it is the GPU it launches on (pinned and managed
    // memory, which every device reads, are not checked).
    if (device_type == nb::device::cuda::value) refs.back().device = static_cast<int>(device_id);
  }
  void finish() {  // spans into shapes/strides are made once their vectors stop growing
    for (size_t k = 0; k < refs.size(); ++k) {
      refs[k].shape = shapes[k];
      refs[k].strides = strides[k];
    }
  }
};

using Overrides = std::vector<std::optional<std::string>>;

Tensors collect_inputs(const fusejit::Program& p, const std::vector<InArray>& arrays, const Overrides& as) {
  Tensors t;
  for (size_t k = 0; k < arrays.size(); ++k) t.add(arrays[k], k < as.size() ? as[k] : std::nullopt, {p, false, k}, false);
  t.finish();
  return t;
}

fusejit::Params to_params(const std::vector<std::pair<std::string, nb::object>>& values) {
  fusejit::Params params;
  for (const auto& [name, v] : values) params.set(name, fusejit_py::to_scalar(v, "param '" + name + "'"));
  return params;
}

fusejit::PlanKind plan_kind(std::string_view plan) {
  if (plan == "fused") return fusejit::PlanKind::Fused;
  if (plan == "unfused") return fusejit::PlanKind::Unfused;
  throw fusejit::Error(fusejit::ErrorKind::User, "plan must be 'fused' or 'unfused', got '" + std::string(plan) + "'");
}

// Bytes a strided view reaches from its first element (0 when it has no elements).
size_t view_bytes(const fusejit::TensorRef& r) {
  int64_t last = 0;
  for (size_t d = 0; d < r.shape.size(); ++d) {
    if (r.shape[d] == 0) return 0;
    last += (r.shape[d] - 1) * (r.strides.empty() ? 0 : r.strides[d]);
  }
  return static_cast<size_t>(last + 1) * fusejit::dtype_size(r.dtype);
}

bool c_contiguous(const fusejit::TensorRef& r) {
  int64_t expect = 1;
  for (size_t d = r.shape.size(); d-- > 0;) {
    if (r.shape[d] != 1 && r.strides[d] != expect) return false;
    expect *= r.shape[d];
  }
  return true;
}

// A CUDA program given host arrays: Program::run() copies them in and the results back (and
// synchronises); the results are then copied into the caller's C-contiguous outputs.
void run_on_host_arrays(const fusejit::Program& p, const Tensors& in, const Tensors& out, const fusejit::Params& params,
                        fusejit::PlanKind kind) {
  std::vector<fusejit::TensorView> views;
  for (const fusejit::TensorRef& r : in.refs)
    views.emplace_back(r.dtype, r.shape, std::span(static_cast<const std::byte*>(r.data), view_bytes(r)), r.strides);
  std::vector<fusejit::HostTensor> results = p.run(views, params, kind);
  std::vector<fusejit::TensorInfo> info = p.graph().outputs();
  for (size_t k = 0; k < results.size() && k < out.refs.size(); ++k) {
    const fusejit::TensorRef& o = out.refs[k];
    if (o.dtype != results[k].dtype() || std::vector<int64_t>(o.shape.begin(), o.shape.end()) != results[k].shape())
      throw fusejit::Error(fusejit::ErrorKind::User, "output '" + info[k].name + "': wrong dtype or shape");
    if (!c_contiguous(o))
      throw fusejit::Error(fusejit::ErrorKind::User,
                           "output '" + info[k].name + "': a CUDA program writes host arrays only when they are "
                           "C-contiguous (pass device tensors for strided outputs)");
    if (results[k].bytes()) std::memcpy(o.data, results[k].data().data(), results[k].bytes());
  }
}

void launch(const fusejit::Program& p, const std::vector<InArray>& inputs, const Overrides& in_as,
            const std::vector<OutArray>& outputs, const Overrides& out_as,
            const std::vector<std::pair<std::string, nb::object>>& param_values, uintptr_t stream,
            std::string_view plan) {
  Tensors in = collect_inputs(p, inputs, in_as);
  Tensors out;
  for (size_t k = 0; k < outputs.size(); ++k) out.add(outputs[k], k < out_as.size() ? out_as[k] : std::nullopt, {p, true, k}, true);
  out.finish();
  fusejit::Params params = to_params(param_values);
  fusejit::PlanKind kind = plan_kind(plan);
  const bool host = (in.device_type ? in.device_type : out.device_type) == nb::device::cpu::value;
  const bool cuda = p.backend() == fusejit::Backend::Cuda;
  if (in.device_type && out.device_type && in.device_type != out.device_type)
    throw fusejit::Error(fusejit::ErrorKind::User, "the outputs are on another kind of device than the inputs");
  released([&] {
    if (cuda && host) run_on_host_arrays(p, in, out, params, kind);
    else p.launch(in.refs, out.refs, params, reinterpret_cast<void*>(stream), kind);
  });
}

std::string cache_name(fusejit::CacheOutcome c) { return std::string(fusejit::cache_outcome_name(c)); }

}  // namespace

nb::object fusejit_py::scalar_to_py(const fusejit::Scalar& s) {
  switch (s.kind) {
    case fusejit::Scalar::Kind::Bool: return nb::bool_(s.i != 0);
    case fusejit::Scalar::Kind::Int: return nb::int_(s.i);
    case fusejit::Scalar::Kind::Float: break;
  }
  return nb::float_(s.f);
}

namespace {

using fusejit_py::scalar_to_py;

// Dim values from {name: size} (a dict, or any mapping as dict() reads it; None for none), each an
// int within int64 (not a bool, as for row_split). TypeError for any other object (a list of
// sizes: nanobind's refusal would dump the extension's signatures).
fusejit::DimValues to_dims(nb::handle given) {
  fusejit::DimValues out;
  if (given.is_none()) return out;
  if (!nb::isinstance<nb::dict>(given) && !nb::hasattr(given, "keys"))
    throw nb::type_error(("dims: expected a dict {name: size}, got " +
                          nb::cast<std::string>(given.type().attr("__name__")))
                             .c_str());
  const nb::dict dims = nb::isinstance<nb::dict>(given) ? nb::borrow<nb::dict>(given)
                                                        : nb::borrow<nb::dict>(nb::module_::import_("builtins").attr("dict")(given));
  for (auto [k, v] : dims) {
    if (!nb::isinstance<nb::str>(k))
      throw nb::type_error(("dims: a dim name is a str, not " + nb::cast<std::string>(nb::repr(k))).c_str());
    const std::string name = nb::cast<std::string>(k);
    out.emplace_back(name, fusejit_py::int_arg(v, "dim '" + name + "'"));
  }
  return out;
}

// The reduction options of compile() and Graph.plan, checked alike: row_split and
// row_cache_limit ints (a NumPy integer or 0-d integer array too, as operator.index takes them; not
// a bool: True would read as 1 part) within int64
// (TypeError, ValueError; < 0 is refused by the library: UserError), row_cache a bool.
void split_options(fusejit::Options& o, nb::handle row_split, nb::handle row_cache, nb::handle row_cache_limit) {
  auto int64_option = [](nb::handle v, const std::string& name, const std::string& meaning) {
    nb::object index;
    if (!fusejit_py::bool_like(v)) {
      PyObject* i = PyNumber_Index(v.ptr());
      if (i) index = nb::steal(i);
      else PyErr_Clear();
    }
    if (!index.is_valid())
      throw nb::type_error((name + " must be an int (" + meaning + "), not " + nb::cast<std::string>(nb::repr(v))).c_str());
    int64_t out = 0;
    if (!nb::try_cast(index, out))
      throw nb::value_error((name + " " + nb::cast<std::string>(nb::repr(index)) + " is outside int64").c_str());
    return out;
  };
  o.row_split = int64_option(row_split, "row_split", "0: fusejit's rule, 1: never split, N parts");
  o.row_cache_limit = int64_option(row_cache_limit, "row_cache_limit", "0: fusejit's rule, N: at most N bytes");
  // A bool, or a NumPy bool scalar or 0-d array; not an array of bools, whatever its size.
  const bool scalar = !nb::hasattr(row_cache, "ndim") || nb::cast<int64_t>(row_cache.attr("ndim")) == 0;
  if (!fusejit_py::bool_like(row_cache) || !scalar)
    throw nb::type_error(("row_cache must be True or False, not " + nb::cast<std::string>(nb::repr(row_cache))).c_str());
  o.row_cache = PyObject_IsTrue(row_cache.ptr()) == 1;
}

nb::dict dims_to_py(const fusejit::DimValues& dims) {
  nb::dict d;
  for (const auto& [k, v] : dims) d[nb::str(k.c_str())] = v;
  return d;
}

fusejit::Backend parse_backend(std::string_view b) {
  if (b == "auto") return fusejit::Backend::Auto;
  if (b == "cuda") return fusejit::Backend::Cuda;
  if (b == "cpu") return fusejit::Backend::Cpu;
  throw fusejit::Error(fusejit::ErrorKind::User, "backend must be 'auto', 'cuda' or 'cpu', got '" + std::string(b) + "'");
}

// fusejit._errors' from_cpp and _warn, taken once when the module is initialised (strong
// references, never released, as the module's own): an import on each error would run the package
// again where fusejit was removed from sys.modules (nanobind aborts on a second initialisation),
// and the classes they make are the ones `fusejit.UserError` names also after an
// importlib.reload of fusejit._errors (they bind its classes when defined).
nb::handle g_from_cpp, g_warn;

// fusejit::Error -> fusejit.Error (a subclass per kind, built by fusejit._errors in Python).
void translate_error(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const fusejit::Error& e) {
    try {
      nb::object exc = g_from_cpp(fusejit::error_kind_name(e.kind()), std::string(e.what()), e.file(), e.line(), e.column(), e.diagnostic());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    } catch (nb::python_error& pe) {
      // What Python raised while building it: a Ctrl-C that arrived during the call (its signal
      // handler runs at the first Python code) raises KeyboardInterrupt, not a RuntimeError.
      pe.restore();
    }
  }
}

// The warning handler: fusejit warnings become Python warnings (fusejit.FusejitWarning), from any
// thread; a warnings filter that raises is re-raised when the C++ call returns.
void python_warning(std::string_view message) {
  nb::gil_scoped_acquire gil;
  try {
    // At the line of the call it comes from: this thread's, or that of the thread a worker serves.
    const std::thread::id origin = fusejit::warning_origin();
    const auto it = origin == std::this_thread::get_id() ? caller_idents.end() : caller_idents.find(origin);
    g_warn(std::string(message), it == caller_idents.end() ? 0 : it->second);
  } catch (nb::python_error& e) {
    pending_warning_errors.try_emplace(fusejit::warning_origin(), std::move(e));  // the first one stays
  }
}

void bind_info(nb::module_& m) {
  nb::class_<fusejit::TensorInfo>(m, "TensorInfo", "A graph input or output: name, dtype, shape, dim names.")
      .def_ro("name", &fusejit::TensorInfo::name, "The name the graph declares.")
      .def_prop_ro("dtype", [](const fusejit::TensorInfo& t) { return std::string(fusejit::dtype_name(t.dtype)); },
                   "Its dtype name: \"f32\", \"bf16\", \"i64\", ... (docs/ops.md).")
      .def_ro("shape", &fusejit::TensorInfo::shape, "Its sizes at the graph's current dims.")
      .def_ro("dim_names", &fusejit::TensorInfo::dim_names, "Per dimension: the dim's name, or \"\" for a literal size.")
      .def("__repr__", [](const fusejit::TensorInfo& t) {
        std::string s = "TensorInfo(" + t.name + " : " + std::string(fusejit::dtype_name(t.dtype)) + "[";
        for (size_t d = 0; d < t.shape.size(); ++d) s += (d ? ", " : "") + std::to_string(t.shape[d]);
        return s + "])";
      });
  nb::class_<fusejit::ParamInfo>(m, "ParamInfo", "A graph param: name, dtype and default value.")
      .def_ro("name", &fusejit::ParamInfo::name, "The name the graph declares.")
      .def_prop_ro("dtype", [](const fusejit::ParamInfo& p) { return std::string(fusejit::dtype_name(p.dtype)); },
                   "Its dtype name (\"f32\", \"i64\", ...).")
      .def_prop_ro("default", [](const fusejit::ParamInfo& p) { return scalar_to_py(p.default_value); },
                   "The value a call that does not give it uses: a bool, int or float.")
      .def("__repr__", [](const fusejit::ParamInfo& p) {
        return "ParamInfo(" + p.name + " : " + std::string(fusejit::dtype_name(p.dtype)) + " = " +
               nb::cast<std::string>(nb::repr(scalar_to_py(p.default_value))) + ")";
      });
  nb::class_<fusejit::NodeInfo>(m, "NodeInfo", "One node of a graph (Graph.nodes), topological order.")
      .def_ro("id", &fusejit::NodeInfo::id, "Its index in Graph.nodes (operands have smaller ids).")
      .def_ro("op", &fusejit::NodeInfo::op, "\"input\", \"param\", \"const\", or an op name of docs/ops.md (\"add\", \"cast\", ...).")
      .def_ro("name", &fusejit::NodeInfo::name, "The name the text gave it; \"\" for a temporary.")
      .def_prop_ro("dtype", [](const fusejit::NodeInfo& n) { return std::string(fusejit::dtype_name(n.dtype)); },
                   "The result dtype name (for \"cast\": the target dtype).")
      .def_ro("shape", &fusejit::NodeInfo::shape, "Its sizes at the graph's current dims.")
      .def_ro("operands", &fusejit::NodeInfo::operands, "Node ids, in the op's argument order.")
      .def_prop_ro(
          "value", [](const fusejit::NodeInfo& n) { return n.op == "const" ? scalar_to_py(n.value) : nb::none(); },
          "\"const\": its value, already rounded to its dtype; None for other ops.")
      .def_ro("slot", &fusejit::NodeInfo::slot, "\"input\"/\"param\": its index in Graph.inputs/params; -1 otherwise.")
      .def_ro("axes", &fusejit::NodeInfo::axes, "Reductions: the reduced axes of the operand, ascending; [] otherwise.")
      .def_ro("keepdim", &fusejit::NodeInfo::keepdim, "Reductions: whether the reduced axes stay as size-1 dims.")
      .def_ro("correction", &fusejit::NodeInfo::correction,
              "mean: the sum is divided by max(0, n - correction) (var and std expand into it); 0 otherwise.")
      .def_ro("initial", &fusejit::NodeInfo::initial,
              "amax/amin: starts from -inf/+inf (NumPy's initial=), so zero elements give it; softmax, "
              "log_softmax and logsumexp expand into such an amax. False otherwise.")
      .def("__repr__", [](const fusejit::NodeInfo& n) {  // "NodeInfo(3: h = add(1, 2) : f32[4, 8])"
        std::string s = "NodeInfo(" + std::to_string(n.id) + ": " + (n.name.empty() ? "" : n.name + " = ") + n.op + "(";
        for (size_t k = 0; k < n.operands.size(); ++k) s += (k ? ", " : "") + std::to_string(n.operands[k]);
        s += ") : " + std::string(fusejit::dtype_name(n.dtype)) + "[";
        for (size_t d = 0; d < n.shape.size(); ++d) s += (d ? ", " : "") + std::to_string(n.shape[d]);
        return s + "])";
      });
  nb::class_<fusejit::KernelInfo>(m, "KernelInfo", "One kernel (fusion group) of a compiled program.")
      .def_ro("name", &fusejit::KernelInfo::name, "Derived from the kernel's content, the same every run; \"\" when not built.")
      .def_ro("source", &fusejit::KernelInfo::source, "The generated CUDA C++ of the kernel alone (the preludes it needs: compile_to_dir); \"\" when not built.")
      .def_ro("ops", &fusejit::KernelInfo::ops, "The op nodes it computes as `fusejit plan` names them, e.g. \"h = add(x, bias)\".")
      .def_ro("elements", &fusejit::KernelInfo::elements, "Its iteration space's elements.")
      .def_ro("read_bytes", &fusejit::KernelInfo::read_bytes, "Bytes it reads, each input once (plus a reduction's re-read rows).")
      .def_ro("write_bytes", &fusejit::KernelInfo::write_bytes, "Bytes it writes, each output once.")
      .def_prop_ro("cache", [](const fusejit::KernelInfo& k) { return cache_name(k.cache); },
                   "Where its binary came from: \"compiled\", \"memory\", \"disk\", \"loaded\" or \"not built\".")
      .def_ro("compile_ms", &fusejit::KernelInfo::compile_ms, "Compile time, ms (0 on a cache hit; once for kernels compiled together).")
      .def_ro("index64", &fusejit::KernelInfo::index64, "64-bit index math (an iteration space of 2^31 elements or more).")
      .def("__repr__", [](const fusejit::KernelInfo& k) {
        if (k.cache == fusejit::CacheOutcome::NotBuilt)  // an unfused kernel of compile(build_unfused=False)
          return std::string("KernelInfo(cache='not built': built on the plan's first use, or by "
                             "compile(build_unfused=True))");
        char ms[32];
        std::snprintf(ms, sizeof ms, "%.1f", k.compile_ms);
        return "KernelInfo('" + k.name + "', elements=" + std::to_string(k.elements) + ", read_bytes=" +
               std::to_string(k.read_bytes) + ", write_bytes=" + std::to_string(k.write_bytes) + ", cache='" +
               cache_name(k.cache) + "', compile_ms=" + ms + ")";
      });
}

// A file or folder argument: a str, bytes or os.PathLike, as Python's open() takes, in the
// file system's encoding (os.fsencode: a name that is not UTF-8 too); None for "" where
// `none_ok`. A NUL in it reaches fusejit, whose UserError names the argument.
std::string path_arg(nb::handle h, const char* what, bool none_ok = true) {
  if (none_ok && h.is_none()) return "";
  if (!nb::isinstance<nb::str>(h) && !nb::isinstance<nb::bytes>(h) && !nb::hasattr(h, "__fspath__"))
    throw nb::type_error((std::string(what) + ": expected a str, bytes or os.PathLike, got " +
                          nb::cast<std::string>(nb::str(h.type().attr("__name__"))))
                             .c_str());
  nb::bytes b = nb::cast<nb::bytes>(nb::module_::import_("os").attr("fsencode")(h));
  if (b.size() == 0)  // as the command line refuses `--cache-dir ""`: not taken for the default
    throw fusejit::Error(fusejit::ErrorKind::User,
                         std::string(what) + ": an empty path" + (none_ok ? "; pass None for the default" : ""));
  return std::string(b.c_str(), b.size());
}
using FolderArg = nb::handle;

// A path fusejit returns, as os.fsdecode gives it (a name that is not UTF-8 too, as surrogate escapes).
nb::object py_path(const std::string& p) {
  return nb::module_::import_("os").attr("fsdecode")(nb::bytes(p.data(), p.size()));
}

void bind_graph(nb::module_& m) {
  using fusejit::Graph;
  nb::class_<Graph>(m, "Graph", "An immutable, verified graph of elementwise ops and reductions (docs/graph-format.md).")
      .def_static(
          "parse",
          [](std::string_view text, nb::handle filename, nb::handle dims) {
            // A name for errors: a str as it is, an os.PathLike or bytes as Graph.load takes them.
            const std::string file = filename.is_none()                 ? std::string("<string>")
                                     : nb::isinstance<nb::str>(filename) ? nb::cast<std::string>(filename)
                                                                         : path_arg(filename, "filename", false);
            fusejit::DimValues d = to_dims(dims);
            return released([&] { return Graph::parse(text, file, d); });
          },
          "text"_a, "filename"_a = nb::none(), "dims"_a = nb::none(),
          nb::sig("def parse(text: str, filename: str | bytes | os.PathLike[str] | None = None, "
                  "dims: Mapping[str, int] | None = None) -> Graph"),
          "Parses and verifies graph text (docs/graph-format.md). filename: named in errors (default "
          "\"<string>\"). dims: {name: size} overriding the file's `dim` declarations. Raises UserError "
          "with file:line:col for bad text, and naming the dim for an unknown dim or a size < 0.")
      .def_static(
          "load",
          [](nb::handle path, nb::handle dims) {
            const std::string file = path_arg(path, "path", false);
            fusejit::DimValues d = to_dims(dims);
            return released([&] { return Graph::load(file, d); });
          },
          "path"_a, "dims"_a = nb::none(),
          nb::sig("def load(path: str | os.PathLike[str], dims: Mapping[str, int] | None = None) -> Graph"),
          "Graph.parse of a file's text (path: a str or os.PathLike), errors located in that file. Raises "
          "UserError for an unreadable file too.")
      .def(
          "with_dims",
          [](const Graph& g, nb::handle dims) {
            if (dims.is_none()) throw nb::type_error("dims: expected a dict {name: size}, got NoneType");
            return g.with_dims(to_dims(dims));
          },
          "dims"_a.none(),
           nb::sig("def with_dims(self, dims: Mapping[str, int]) -> Graph"),
           "A new Graph with some dims set to other sizes ({name: size}), verified again; this one is "
           "unchanged. Raises UserError for an unknown dim, a size < 0 or shapes that no longer agree.")
      .def_prop_ro("name", &Graph::name, "From its `graph NAME` line; \"\" if none.")
      .def_prop_ro("inputs", &Graph::inputs, "TensorInfo of each input, declaration order.")
      .def_prop_ro("outputs", &Graph::outputs, "TensorInfo of each output, declaration order.")
      .def_prop_ro("params", &Graph::params, "ParamInfo of each param, declaration order.")
      .def_prop_ro(
          "dims", [](const Graph& g) { return dims_to_py(g.dims()); }, "{name: size} of the declared dims, as they are now.")
      .def_prop_ro("op_count", &Graph::op_count, "Op nodes (inputs, params and constants not counted).")
      .def_prop_ro("nodes", &Graph::nodes, "NodeInfo of every node, topological order.")
      .def_prop_ro("output_nodes", &Graph::output_nodes, "Per output (declaration order): its node's id in nodes.")
      .def("to_text", &Graph::to_text,
           "The graph as text in the graph format (docs/graph-format.md); Graph.parse of it gives the same graph.")
      .def(
          "plan",
          [](const Graph& g, bool fast_math, nb::handle row_split, nb::handle row_cache, nb::handle row_cache_limit,
             nb::handle arch) {
            fusejit::Options o;
            split_options(o, row_split, row_cache, row_cache_limit);
            o.fast_math = fast_math;
            if (!arch.is_none() && !nb::isinstance<nb::str>(arch))
              throw nb::type_error(("arch: expected a str such as \"sm_90\", got " + nb::cast<std::string>(nb::str(arch.type().attr("__name__")))).c_str());
            o.arch = arch.is_none() ? "" : nb::cast<std::string>(arch);
            if (!arch.is_none() && o.arch.empty())
              throw fusejit::Error(fusejit::ErrorKind::User, "arch: an empty name; pass None to plan without a GPU");
            o.message_style = fusejit::MessageStyle::Python;
            std::string json = released([&] { return fusejit::plan_graph(g, o).json; });
            return nb::module_::import_("json").attr("loads")(json);
          },
          "fast_math"_a = false, "row_split"_a.none() = 0, "row_cache"_a.none() = true,
          "row_cache_limit"_a.none() = 0, "arch"_a.none() = nb::none(),
          nb::sig("def plan(self, fast_math: bool = False, row_split: int = 0, row_cache: bool = True, "
                  "row_cache_limit: int = 0, arch: str | None = None) -> dict[str, typing.Any]"),
          "`fusejit plan --json` as Python objects (without its \"warnings\", which come as "
          "FusejitWarning): the rewrites that fired, the fused and unfused plans' fusion groups, their traffic "
          "and notes (docs/python.md); Program.rewritten is the rewritten graph. fast_math as compile's; row_split, row_cache and row_cache_limit: "
          "plan reductions as compile(...) runs them; arch (\"sm_90\"): as on a GPU of that compute "
          "capability (its row cache limit; short rows re-read), None: without a GPU (row_cache_limit 0: "
          "48 KiB). Raises TypeError/ValueError/UserError for bad option values as compile does, and "
          "UserError for an arch whose shared memory fusejit does not know.")
      .def("__repr__", [](const Graph& g) { return "<fusejit.Graph" + (g.name().empty() ? "" : " " + g.name()) + ">"; })
      // Immutable (with_dims makes a new one): a copy is the graph itself (pickled as its text:
      // fusejit/__init__.py).
      .def("__copy__", [](nb::handle self) { return nb::borrow(self); })
      .def("__deepcopy__", [](nb::handle self, nb::handle) { return nb::borrow(self); }, "memo"_a);
}


fusejit::Options make_options(bool fast_math, std::optional<std::string> arch, std::string_view backend,
                              const FolderArg& cache_dir, bool disk_cache,
                              std::vector<std::string> nvrtc_options, int device, const FolderArg& dump_dir,
                              bool build_unfused, nb::handle row_split, nb::handle row_cache, nb::handle row_cache_limit) {
  fusejit::Options o;
  o.fast_math = fast_math;
  o.arch = arch.value_or("");
  o.backend = parse_backend(backend);
  o.cache_dir = path_arg(cache_dir, "cache_dir");
  o.disk_cache = disk_cache;
  o.nvrtc_options = std::move(nvrtc_options);
  o.device = device;
  o.dump_dir = path_arg(dump_dir, "dump_dir");
  o.build_unfused = build_unfused;
  split_options(o, row_split, row_cache, row_cache_limit);
  o.message_style = fusejit::MessageStyle::Python;  // messages name `arch`, `row_split`, ...
  return o;
}

void bind_program(nb::module_& m) {
  using fusejit::Program;
  nb::class_<Program>(m, "_Program")
      .def_prop_ro("backend", [](const Program& p) { return p.backend() == fusejit::Backend::Cuda ? "cuda" : "cpu"; })
      .def_prop_ro("target", &Program::target)
      .def_prop_ro("device", &Program::device)
      .def_prop_ro("driver_version", &Program::driver_version)
      .def_prop_ro("backend_note", &Program::backend_note)
      .def_prop_ro("dump_dir", [](const Program& p) { return py_path(p.dump_dir()); })
      .def_prop_ro("fast_math", &Program::fast_math)
      .def_prop_ro("graph", &Program::graph)
      .def_prop_ro("rewritten", &Program::rewritten)
      .def_prop_ro("rewrite_summary", &Program::rewrite_summary)
      .def_prop_ro("plan_text", &Program::plan_text,
                   "Fusion groups, traffic and predicted ratio (as `fusejit plan`) at the compiled dims (the "
                   "graph's, for a fuse trace its first call's sizes); a launch at other sizes runs the same "
                   "kernels with the grid, row split and row cache chosen for them")
      .def("kernels", [](const Program& p, std::string_view plan) { return p.kernels(plan_kind(plan)); }, "plan"_a)
      .def_prop_ro("specializations", &Program::specializations)
      .def(
          "output_shapes",
          [](const Program& p, const std::vector<InArray>& inputs, const Overrides& as, std::string_view plan) {
            Tensors in = collect_inputs(p, inputs, as);
            // It may compile a specialization, whose worker threads may warn: without the GIL.
            return released([&] { return p.output_shapes(in.refs, plan_kind(plan)); });
          },
          "inputs"_a, "as_dtypes"_a, "plan"_a)
      .def("launch", &launch, "inputs"_a, "in_as"_a, "outputs"_a, "out_as"_a, "params"_a, "stream"_a, "plan"_a);

  m.def(
      "compile",
      [](const fusejit::Graph& g, bool fast_math, std::optional<std::string> arch, std::string_view backend,
         const FolderArg& cache_dir, bool disk_cache, std::vector<std::string> nvrtc_options, int device,
         const FolderArg& dump_dir, bool build_unfused, nb::handle row_split, nb::handle row_cache,
         nb::handle row_cache_limit) {
        fusejit::Options o = make_options(fast_math, std::move(arch), backend, cache_dir, disk_cache,
                                          std::move(nvrtc_options), device, dump_dir, build_unfused,
                                          row_split, row_cache, row_cache_limit);
        return released([&] { return Program::compile(g, o); });
      },
      "graph"_a, "fast_math"_a, "arch"_a, "backend"_a, "cache_dir"_a.none(), "disk_cache"_a, "nvrtc_options"_a, "device"_a,
      "dump_dir"_a.none(), "build_unfused"_a, "row_split"_a.none(), "row_cache"_a.none(), "row_cache_limit"_a.none());
  m.def(
      "load",
      [](nb::handle dir, const FolderArg& cache_dir, bool disk_cache, int device, std::string_view backend) {
        fusejit::Options o = make_options(false, std::nullopt, backend, cache_dir, disk_cache, {}, device,
                                          nb::none(), false, nb::int_(0), nb::bool_(true), nb::int_(0));
        const std::string folder = path_arg(dir, "dir", false);
        return released([&] { return Program::load(folder, o); });
      },
      "dir"_a.none(), "cache_dir"_a.none(), "disk_cache"_a, "device"_a, "backend"_a);
  m.def(
      "compile_to_dir",
      [](const fusejit::Graph& g, const std::string& arch, nb::handle out_dir, bool fast_math, const FolderArg& cache_dir,
         bool disk_cache, std::vector<std::string> nvrtc_options, bool fused_only) {
        fusejit::Options o = make_options(fast_math, arch, "auto", cache_dir, disk_cache, std::move(nvrtc_options), 0,
                                          nb::none(), false, nb::int_(0), nb::bool_(true), nb::int_(0));
        const std::string folder = path_arg(out_dir, "out_dir", false);
        return released([&] { return fusejit::compile_to_dir(g, arch, folder, fast_math, o, !fused_only); });
      },
      "graph"_a, "arch"_a, "out_dir"_a.none(), "fast_math"_a, "cache_dir"_a.none(), "disk_cache"_a, "nvrtc_options"_a,
      "fused_only"_a);
}


// The kernel cache on disk (fusejit/report.h's cache_* calls, what `fusejit cache` prints): the
// wheel has no `fusejit` command, so Python reaches them here.
fusejit::Options cache_options(const FolderArg& cache_dir) {
  fusejit::Options o;
  o.cache_dir = path_arg(cache_dir, "cache_dir");
  o.message_style = fusejit::MessageStyle::Python;
  return o;
}

// A cache_* call taking Python's cache_dir argument, run without the GIL (it reads the folder).
template <class R>
auto cache_call(R (*f)(const fusejit::Options&)) {
  return [f](const FolderArg& d) {
    const fusejit::Options o = cache_options(d);
    return released([&] { return f(o); });
  };
}

void bind_cache(nb::module_& m) {
  using fusejit::CacheEntryInfo;
  using fusejit::CacheStats;
  nb::class_<CacheStats>(m, "CacheStats", "The kernel cache folder's counts (fusejit.cache_stats, `fusejit cache stats`).")
      .def_prop_ro("path", [](const CacheStats& c) { return py_path(c.path); }, "The cache folder, an absolute path.")
      .def_ro("enabled", &CacheStats::enabled, "False: disabled (FUSEJIT_DISABLE_CACHE) or unusable (disabled_reason).")
      .def_ro("disabled_reason", &CacheStats::disabled_reason, "Why not enabled; \"\" when enabled.")
      .def_ro("entries", &CacheStats::entries, "GPU kernel entries (CUBIN or PTX), damaged ones not counted.")
      .def_ro("bytes", &CacheStats::bytes, "Their files' total size, bytes.")
      .def_ro("cap_bytes", &CacheStats::cap_bytes,
              "Size cap of all entries together, bytes (FUSEJIT_CACHE_MAX_MB; least recently used evicted "
              "first); 0: no cap.")
      .def_ro("host_modules", &CacheStats::host_modules, "CPU path: compiled host modules (entries of the same store).")
      .def_ro("host_bytes", &CacheStats::host_bytes, "Their files' total size, bytes.")
      .def_ro("invalid", &CacheStats::invalid, "Damaged entries (each deleted and rebuilt on its next use).")
      .def_ro("temp_files", &CacheStats::temp_files, "Temporary files and build folders (swept after an hour).")
      .def_ro("unusable_subfolders", &CacheStats::unusable_subfolders,
              "Why each subfolder the cache does not use is not used (another owner, say root after a sudo run, or "
              "writable by others), sorted: the kernels whose keys fall in it are compiled again by each process.")
      .def("__repr__", [](const CacheStats& s) {
        return "CacheStats(" + nb::cast<std::string>(nb::repr(py_path(s.path))) + ", entries=" + std::to_string(s.entries) +
               ", bytes=" + std::to_string(s.bytes) + ", host_modules=" + std::to_string(s.host_modules) +
               ", host_bytes=" + std::to_string(s.host_bytes) + ", invalid=" + std::to_string(s.invalid) +
               (s.unusable_subfolders.empty() ? std::string()
                                              : ", unusable_subfolders=" + std::to_string(s.unusable_subfolders.size())) +
               (s.enabled ? std::string() : ", disabled: " + s.disabled_reason) + ")";
      });
  nb::class_<CacheEntryInfo>(m, "CacheEntry", "One entry of the kernel cache (fusejit.cache_list).")
      .def_ro("key", &CacheEntryInfo::key, "32 hex digits: XXH3-128 of everything that changes the binary.")
      .def_prop_ro("path", [](const CacheEntryInfo& e) { return py_path(e.path); }, "Its file.")
      .def_ro("bytes", &CacheEntryInfo::bytes, "Its file's size, bytes.")
      .def_ro("label", &CacheEntryInfo::label, "The kernel name(s) it holds.")
      .def_ro("target", &CacheEntryInfo::target, "\"sm_90\" (CUBIN), \"compute_90\" (PTX) or \"host\" (a CPU-path module).")
      .def_ro("valid", &CacheEntryInfo::valid, "Its header and payload hash check out.")
      .def_ro("problem", &CacheEntryInfo::problem, "Why not valid (\"truncated\", ...); \"\" when valid.")
      .def("__repr__", [](const CacheEntryInfo& e) {
        return "CacheEntry('" + e.label + "', target='" + e.target + "', bytes=" + std::to_string(e.bytes) +
               (e.valid ? std::string() : ", problem='" + e.problem + "'") + ")";
      });
  m.def("cache_path", [](const FolderArg& d) { return py_path(fusejit::cache_path(cache_options(d))); },
        "cache_dir"_a.none());
  m.def("cache_stats", cache_call(&fusejit::cache_stats), "cache_dir"_a.none());
  m.def("cache_list", cache_call(&fusejit::cache_list), "cache_dir"_a.none());
  m.def("cache_clear", cache_call(&fusejit::cache_clear), "cache_dir"_a.none());
}
}  // namespace

NB_MODULE(_fusejit, m) {
  m.doc() = "fusejit's C++ API (use the `fusejit` package, not this module)";
  m.attr("__version__") = std::string(fusejit::version());
  const nb::module_ errors = nb::module_::import_("fusejit._errors");
  g_from_cpp = nb::object(errors.attr("from_cpp")).release();
  g_warn = nb::object(errors.attr("_warn")).release();
  nb::register_exception_translator(&translate_error);
  // Without the GIL: setting waits for handler calls in progress, which wait for the GIL.
  released([] { fusejit::set_warning_handler(&python_warning); });
  // At exit (an atexit hook, before Python begins to finalise): restore the stderr handler
  // (Python is finalised before static destructors run), then close the GIL gate (GilRelease).
  // Threads still running at exit (daemon threads) hold objects that are never released: nanobind's
  // report of them at exit ("leaked N instances ... a reference counting issue in the binding
  // code") would be about the user's threads, not a leak.
  m.def("_at_exit", [](bool other_threads) {
    if (other_threads) nb::set_leak_warnings(false);
    released([] { fusejit::set_warning_handler({}); });
    fusejit_py::close_gil_gate();
  });
  bind_info(m);
  bind_graph(m);
  fusejit_py::bind_builder(m);
  bind_program(m);
  bind_cache(m);
}
