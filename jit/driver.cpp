// Loading libcuda and the small RAII layer over it. See driver.h.
#include "jit/driver.h"

#include "jit/fork.h"
#include "jit/nvrtc.h"

#include <dlfcn.h>

#include <cstdlib>
#include <fmt/format.h>

namespace fusejit::jit {
namespace {

// cuGetProcAddress (v2, CUDA 12.0+): symbol, out pointer, CUDA version, flags, symbol status.
using GetProcAddressFn = cu::Result (*)(const char*, void**, int, unsigned long long, int*);
using DriverGetVersionFn = cu::Result (*)(int*);
// CU_GET_PROC_ADDRESS_LEGACY_STREAM: the default-stream semantics of the CUDA runtime's default.
constexpr unsigned long long kLegacyStream = 1;

std::mutex g_driver_mutex;
std::shared_ptr<const Driver> g_driver;  // guarded by g_driver_mutex

// Resolves one entry point into `slot` (the table's function pointer member).
template <class Fn>
bool resolve(GetProcAddressFn gpa, const char* name, Fn& slot, std::string& missing) {
  void* p = nullptr;
  int status = 0;
  cu::Result r = gpa(name, &p, kDriverAbiVersion, kLegacyStream, &status);
  if (r != cu::kSuccess || p == nullptr || status != 0) {
    if (!missing.empty()) missing += ", ";
    missing += name;
    return false;
  }
  slot = reinterpret_cast<Fn>(p);
  return true;
}

}  // namespace

std::string cuda_version_string(int version) {
  if (version <= 0) return "CUDA (unknown version)";
  return fmt::format("CUDA {}.{}", version / 1000, (version % 1000) / 10);
}

std::string ptx_too_new_message(int driver_version, int nvrtc_version) {
  return fmt::format(
      "the driver ({}) is older than NVRTC ({}) that produced this PTX, so it cannot JIT-compile it: "
      "install an NVIDIA driver for {} or newer, or use an NVRTC no newer than the driver",
      cuda_version_string(driver_version), cuda_version_string(nvrtc_version),
      cuda_version_string(nvrtc_version));
}

std::string format_bytes(uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / 1024.0;
  int u = 0;
  while (v >= 1024.0 && u < 3) {
    v /= 1024.0;
    ++u;
  }
  return fmt::format("{:.1f} {}", v, units[u]);
}

int libcuda_version(void* handle) {
  auto get_version = reinterpret_cast<DriverGetVersionFn>(dlsym(handle, "cuDriverGetVersion"));
  int v = 0;
  if (get_version == nullptr || get_version(&v) != cu::kSuccess) return 0;
  return v;
}

std::shared_ptr<const Driver> Driver::load(const char* library) {
  std::shared_ptr<Driver> d(new Driver());
  dlerror();
  void* h = locked_dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* err = dlerror();
    // dlerror() usually starts with the library's name already: say it once.
    std::string e = err ? err : "unknown error";
    std::string prefix = std::string(library) + ": ";
    d->reason_ = e.rfind(prefix, 0) == 0 ? "no CUDA driver found: " + e
                                         : fmt::format("no CUDA driver found: dlopen {}: {}", library, e);
    return d;
  }
  d->handle_ = h;
  d->version_ = libcuda_version(h);
  auto gpa = reinterpret_cast<GetProcAddressFn>(dlsym(h, "cuGetProcAddress_v2"));
  if (gpa == nullptr) {
    d->reason_ = fmt::format(
        "no CUDA driver found: {} ({}) has no cuGetProcAddress_v2; fusejit needs a driver for CUDA 12.0 or newer",
        library, cuda_version_string(d->version_));
    return d;
  }
  DriverApi& a = d->api_;
  std::string missing;
#define FJ_RESOLVE(name) resolve(gpa, #name, a.name, missing)
  FJ_RESOLVE(cuInit);
  FJ_RESOLVE(cuDriverGetVersion);
  FJ_RESOLVE(cuGetErrorName);
  FJ_RESOLVE(cuGetErrorString);
  FJ_RESOLVE(cuDeviceGetCount);
  FJ_RESOLVE(cuDeviceGet);
  FJ_RESOLVE(cuDeviceGetName);
  FJ_RESOLVE(cuDeviceGetAttribute);
  FJ_RESOLVE(cuDeviceTotalMem);
  FJ_RESOLVE(cuDevicePrimaryCtxRetain);
  FJ_RESOLVE(cuDevicePrimaryCtxRelease);
  FJ_RESOLVE(cuCtxGetCurrent);
  FJ_RESOLVE(cuCtxGetDevice);
  FJ_RESOLVE(cuCtxPushCurrent);
  FJ_RESOLVE(cuCtxPopCurrent);
  std::string optional;  // entry points fusejit does without
  resolve(gpa, "cuCtxGetId", a.cuCtxGetId, optional);
  FJ_RESOLVE(cuStreamCreate);
  FJ_RESOLVE(cuStreamDestroy);
  FJ_RESOLVE(cuStreamSynchronize);
  FJ_RESOLVE(cuStreamIsCapturing);
  FJ_RESOLVE(cuModuleLoadDataEx);
  FJ_RESOLVE(cuModuleUnload);
  FJ_RESOLVE(cuModuleGetFunction);
  FJ_RESOLVE(cuFuncSetAttribute);
  FJ_RESOLVE(cuFuncGetAttribute);
  FJ_RESOLVE(cuOccupancyMaxPotentialBlockSize);
  FJ_RESOLVE(cuOccupancyMaxActiveBlocksPerMultiprocessor);
  FJ_RESOLVE(cuLaunchKernel);
  FJ_RESOLVE(cuMemAlloc);
  FJ_RESOLVE(cuMemFree);
  FJ_RESOLVE(cuMemAllocAsync);
  FJ_RESOLVE(cuMemFreeAsync);
  FJ_RESOLVE(cuMemGetInfo);
  FJ_RESOLVE(cuMemcpyHtoDAsync);
  FJ_RESOLVE(cuMemcpyDtoHAsync);
  FJ_RESOLVE(cuMemcpyDtoDAsync);
  FJ_RESOLVE(cuMemsetD8Async);
  FJ_RESOLVE(cuEventCreate);
  FJ_RESOLVE(cuEventDestroy);
  FJ_RESOLVE(cuEventRecord);
  FJ_RESOLVE(cuEventSynchronize);
  FJ_RESOLVE(cuEventElapsedTime);
#undef FJ_RESOLVE
  if (!missing.empty()) {
    d->reason_ = fmt::format("no usable CUDA driver: {} ({}) does not provide {} for the CUDA 12.0 ABI", library,
                             cuda_version_string(d->version_), missing);
    return d;
  }
  d->available_ = true;
  return d;
}

std::shared_ptr<const Driver> Driver::from_api(const DriverApi& api, int version) {
  std::shared_ptr<Driver> d(new Driver());
  d->api_ = api;
  d->version_ = version;
  d->available_ = true;
  return d;
}

// libcuda is deliberately never dlclose'd: unloading the driver while the process may still hold
// contexts (or during exit) is not supported by it.
Driver::~Driver() = default;

std::shared_ptr<const Driver> Driver::get() {
  std::lock_guard lock(g_driver_mutex);
  if (!g_driver) g_driver = load();
  return g_driver;
}

void set_driver_for_testing(std::shared_ptr<const Driver> driver) {
  std::lock_guard lock(g_driver_mutex);
  g_driver = std::move(driver);
}

const DriverApi& Driver::api() const {
  if (!available_) throw DriverError(DriverErrorKind::NoDriver, reason_);
  return api_;
}

std::string Driver::describe(cu::Result r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api_.cuGetErrorName == nullptr || api_.cuGetErrorName(r, &name) != cu::kSuccess || name == nullptr)
    return fmt::format("CUresult {} (unknown to this driver)", r);
  if (api_.cuGetErrorString == nullptr || api_.cuGetErrorString(r, &text) != cu::kSuccess || text == nullptr)
    return name;
  return fmt::format("{} ({})", name, text);
}

void Driver::check(cu::Result r, const char* call, std::string_view kernel) const {
  if (r == cu::kSuccess) return;
  // "CALL failed for kernel KERNEL" / "CALL failed"
  std::string failed = kernel.empty() ? fmt::format("{} failed", call) : fmt::format("{} failed for kernel {}", call, kernel);
  if (r == cu::kErrorUnsupportedPtxVersion)
    throw DriverError(DriverErrorKind::PtxTooNew,
                      fmt::format("{} ({}: {})", ptx_too_new_message(version_, nvrtc_version().number()), failed, describe(r)),
                      r);
  DriverErrorKind kind = DriverErrorKind::Other;
  if (r == cu::kErrorOutOfMemory) kind = DriverErrorKind::OutOfMemory;
  if (r == cu::kErrorNoDevice || r == cu::kErrorInvalidDevice) kind = DriverErrorKind::NoDevice;
  throw DriverError(kind, fmt::format("{}: {}", failed, describe(r)), r);
}

// ---- DeviceContext ---------------------------------------------------------------------------

std::shared_ptr<DeviceContext> DeviceContext::open(int ordinal, std::shared_ptr<const Driver> driver) {
  if (!driver) driver = Driver::get();
  const DriverApi& a = driver->api();  // throws NoDriver
  std::shared_ptr<DeviceContext> dc(new DeviceContext());
  dc->driver_ = driver;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  std::string visible_note = visible ? fmt::format(" (CUDA_VISIBLE_DEVICES={})", visible) : std::string();
  cu::Result r = a.cuInit(0);
  if (r == cu::kErrorNoDevice)
    throw DriverError(DriverErrorKind::NoDevice,
                      fmt::format("no CUDA device found: the driver ({}) reports {}{}",
                                  cuda_version_string(driver->version()), driver->describe(r), visible_note),
                      r);
  driver->check(r, "cuInit");

  cu::Context current = nullptr;
  driver->check(a.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current != nullptr) {
    // The caller (often the CUDA runtime) already has a context: share it, never replace it.
    dc->ctx_ = current;
    driver->check(a.cuCtxGetDevice(&dc->dev_), "cuCtxGetDevice");
    dc->owns_primary_ = false;
  } else {
    int count = 0;
    r = a.cuDeviceGetCount(&count);
    if (r == cu::kErrorNoDevice) count = 0;
    else driver->check(r, "cuDeviceGetCount");
    if (count == 0)
      throw DriverError(DriverErrorKind::NoDevice,
                        fmt::format("no CUDA device found: the driver ({}) sees no device{}",
                                    cuda_version_string(driver->version()), visible_note));
    if (ordinal < 0 || ordinal >= count)
      throw DriverError(DriverErrorKind::NoDevice,
                        fmt::format("device {} requested but only {} CUDA device{} {} visible (ordinals 0..{}){}",
                                    ordinal, count, count == 1 ? "" : "s", count == 1 ? "is" : "are", count - 1,
                                    visible_note));
    driver->check(a.cuDeviceGet(&dc->dev_, ordinal), "cuDeviceGet");
    driver->check(a.cuDevicePrimaryCtxRetain(&dc->ctx_, dc->dev_), "cuDevicePrimaryCtxRetain");
    dc->owns_primary_ = true;
  }
  dc->ctx_id_ = jit::context_id(*driver, dc->ctx_);

  DeviceInfo& info = dc->info_;
  info.ordinal = static_cast<int>(dc->dev_);
  char name[256] = {};
  driver->check(a.cuDeviceGetName(name, sizeof(name) - 1, dc->dev_), "cuDeviceGetName");
  info.name = name;
  auto attr = [&](int attribute, const char* what) {
    int v = 0;
    cu::Result ar = a.cuDeviceGetAttribute(&v, attribute, dc->dev_);
    if (ar != cu::kSuccess)
      driver->check(ar, fmt::format("cuDeviceGetAttribute({})", what).c_str());
    return v;
  };
  info.cc_major = attr(cu::kAttrComputeCapabilityMajor, "COMPUTE_CAPABILITY_MAJOR");
  info.cc_minor = attr(cu::kAttrComputeCapabilityMinor, "COMPUTE_CAPABILITY_MINOR");
  info.sm_count = attr(cu::kAttrMultiprocessorCount, "MULTIPROCESSOR_COUNT");
  info.l2_bytes = attr(cu::kAttrL2CacheSize, "L2_CACHE_SIZE");
  info.max_threads_per_block = attr(cu::kAttrMaxThreadsPerBlock, "MAX_THREADS_PER_BLOCK");
  info.max_threads_per_sm = attr(cu::kAttrMaxThreadsPerMultiprocessor, "MAX_THREADS_PER_MULTIPROCESSOR");
  info.max_blocks_per_sm = attr(cu::kAttrMaxBlocksPerMultiprocessor, "MAX_BLOCKS_PER_MULTIPROCESSOR");
  info.shared_per_block_optin = attr(cu::kAttrMaxSharedMemoryPerBlockOptin, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN");
  info.memory_pools = attr(cu::kAttrMemoryPoolsSupported, "MEMORY_POOLS_SUPPORTED") != 0;
  size_t total = 0;
  driver->check(a.cuDeviceTotalMem(&total, dc->dev_), "cuDeviceTotalMem");
  info.total_memory = static_cast<int64_t>(total);
  info.driver_version = driver->version();
  return dc;
}

DeviceContext::~DeviceContext() {
  if (owns_primary_ && driver_ && driver_->available()) driver_->api().cuDevicePrimaryCtxRelease(dev_);
}

cu::DevicePtr stream_alloc(const DeviceContext& dc, size_t bytes, cu::Stream stream, std::string_view what) {
  const DriverApi& a = dc.api();
  const bool pools = dc.info().memory_pools;
  if (!pools) {
    int capturing = 0;
    dc.driver().check(a.cuStreamIsCapturing(stream, &capturing), "cuStreamIsCapturing");
    if (capturing != 0)
      throw DriverError(DriverErrorKind::Other,
                        fmt::format("this launch needs device memory for {}, and {} has no memory pools "
                                    "(MEMORY_POOLS_SUPPORTED is 0): cuMemAlloc and the synchronisation before cuMemFree "
                                    "cannot be captured in a CUDA graph; launch it outside the capture",
                                    what, dc.info().name),
                        cu::kErrorInvalidValue);
  }
  const char* call = pools ? "cuMemAllocAsync" : "cuMemAlloc";
  cu::DevicePtr p = 0;
  const cu::Result r = pools ? a.cuMemAllocAsync(&p, bytes, stream) : a.cuMemAlloc(&p, bytes);
  if (r == cu::kErrorOutOfMemory)
    throw DriverError(DriverErrorKind::OutOfMemory,
                      fmt::format("out of device memory: {} of {} for {} failed", call, format_bytes(bytes), what), r);
  dc.driver().check(r, call);
  return p;
}

void stream_free(const DeviceContext& dc, cu::DevicePtr ptr, cu::Stream stream) noexcept {
  if (dc.info().memory_pools) {
    dc.api().cuMemFreeAsync(ptr, stream);
    return;
  }
  dc.api().cuStreamSynchronize(stream);  // its error is a queued kernel's, reported by the next call
  dc.api().cuMemFree(ptr);
}

uint64_t context_id(const Driver& driver, cu::Context ctx) {
  const DriverApi& a = driver.api();
  if (a.cuCtxGetId == nullptr) return 0;
  unsigned long long id = 0;
  driver.check(a.cuCtxGetId(ctx, &id), "cuCtxGetId");
  return id;
}

DeviceContext::Scope::Scope(const DeviceContext& dc) : dc_(dc) {
  const DriverApi& a = dc.api();
  cu::Context current = nullptr;
  dc.driver().check(a.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current != dc.context()) {
    dc.driver().check(a.cuCtxPushCurrent(dc.context()), "cuCtxPushCurrent");
    pushed_ = true;
  }
}

DeviceContext::Scope::~Scope() {
  if (pushed_) {
    cu::Context popped = nullptr;
    dc_.api().cuCtxPopCurrent(&popped);  // a destructor cannot throw; a failed pop leaves ours current
  }
}

// ---- OwnedStream -----------------------------------------------------------------------------

OwnedStream::OwnedStream(const DeviceContext& dc) : dc_(dc) {
  dc.driver().check(dc.api().cuStreamCreate(&s_, 1 /* CU_STREAM_NON_BLOCKING */), "cuStreamCreate");
}

OwnedStream::~OwnedStream() {
  if (!s_) return;
  dc_.api().cuStreamSynchronize(s_);  // a destructor cannot throw; a failed sync leaves nothing to do
  dc_.api().cuStreamDestroy(s_);
}

// ---- DeviceBuffer ----------------------------------------------------------------------------

DeviceBuffer::DeviceBuffer(std::shared_ptr<DeviceContext> ctx, size_t bytes, std::string_view what)
    : ctx_(std::move(ctx)) {
  if (bytes == 0) return;
  DeviceContext::Scope scope(*ctx_);
  const DriverApi& a = ctx_->api();
  cu::DevicePtr p = 0;
  cu::Result r = a.cuMemAlloc(&p, bytes);
  if (r == cu::kErrorOutOfMemory) {
    size_t free_b = 0, total_b = 0;
    std::string avail;
    if (a.cuMemGetInfo(&free_b, &total_b) == cu::kSuccess)
      avail = fmt::format(" (free {} of {} on {})", format_bytes(free_b), format_bytes(total_b), ctx_->info().name);
    throw DriverError(DriverErrorKind::OutOfMemory,
                      fmt::format("out of device memory: cuMemAlloc of {} failed{}{}", format_bytes(bytes),
                                  what.empty() ? std::string() : fmt::format(" for {}", what), avail),
                      r);
  }
  ctx_->driver().check(r, "cuMemAlloc");
  ptr_ = p;
  bytes_ = bytes;
}

void DeviceBuffer::release() noexcept {
  if (ptr_ != 0 && ctx_) {
    try {
      DeviceContext::Scope scope(*ctx_);
      ctx_->api().cuMemFree(ptr_);
    } catch (...) {
      // Freeing during teardown after a driver failure: nothing useful to report.
    }
  }
  ptr_ = 0;
  bytes_ = 0;
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ctx_(std::move(o.ctx_)), ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = 0;
  o.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    release();
    ctx_ = std::move(o.ctx_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = 0;
    o.bytes_ = 0;
  }
  return *this;
}

}  // namespace fusejit::jit
