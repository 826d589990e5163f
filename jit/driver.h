// The CUDA Driver API, loaded at run time: libcuda.so.1 is dlopen'ed (never linked), so every
// fusejit binary starts and runs its CPU path on machines with no NVIDIA driver. Entry points are
// resolved once through cuGetProcAddress with an explicit CUDA version (the ABI this file was
// written against), every call is checked, and errors name the call, the kernel and the driver's
// own cuGetErrorName / cuGetErrorString. Also: the device and its context, device buffers.
//
// This header declares the few Driver API types it needs itself (opaque handles with the same
// struct tags as cuda.h, so both headers can be included together); driver.cpp static_asserts the
// constants below against cuda.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;

namespace fusejit::jit {

// Driver API types (ABI of CUDA 12.0+, 64-bit): see cuda.h.
namespace cu {
using Result = int;                    // CUresult
using Device = int;                    // CUdevice
using DevicePtr = unsigned long long;  // CUdeviceptr (v2)
using Context = CUctx_st*;
using Module = CUmod_st*;
using Function = CUfunc_st*;
using Stream = CUstream_st*;
using Event = CUevent_st*;
using OccupancyB2DSize = size_t (*)(int block_size);

// CUresult values fusejit treats specially (cuda.h, enum cudaError_enum).
inline constexpr Result kSuccess = 0;
inline constexpr Result kErrorInvalidValue = 1;
inline constexpr Result kErrorOutOfMemory = 2;
inline constexpr Result kErrorNotInitialized = 3;
inline constexpr Result kErrorNoDevice = 100;
inline constexpr Result kErrorInvalidDevice = 101;
inline constexpr Result kErrorNoBinaryForGpu = 209;
inline constexpr Result kErrorInvalidImage = 200;
inline constexpr Result kErrorInvalidPtx = 218;
inline constexpr Result kErrorUnsupportedPtxVersion = 222;
inline constexpr Result kErrorNotFound = 500;
// CUdevice_attribute values used for DeviceInfo.
inline constexpr int kAttrMaxThreadsPerBlock = 1;
inline constexpr int kAttrMultiprocessorCount = 16;
inline constexpr int kAttrL2CacheSize = 38;
inline constexpr int kAttrMaxThreadsPerMultiprocessor = 39;
inline constexpr int kAttrComputeCapabilityMajor = 75;
inline constexpr int kAttrComputeCapabilityMinor = 76;
inline constexpr int kAttrMaxBlocksPerMultiprocessor = 106;
inline constexpr int kAttrMaxSharedMemoryPerBlockOptin = 97;
inline constexpr int kAttrMemoryPoolsSupported = 115;
// CUfunction_attribute: the most dynamic shared memory a launch of the function may ask for
// (above 48 KiB in all with its static shared memory only after this opt-in; CUDA C++ Programming
// Guide, "Shared Memory").
inline constexpr int kFuncAttrMaxDynamicSharedSizeBytes = 8;
// CUfunction_attribute: the function's static shared memory in bytes (its __shared__ arrays).
inline constexpr int kFuncAttrSharedSizeBytes = 1;
// CUjit_option values for the JIT error log of cuModuleLoadDataEx.
inline constexpr int kJitErrorLogBuffer = 5;
inline constexpr int kJitErrorLogBufferSizeBytes = 6;
}  // namespace cu

// The driver entry points fusejit uses, each with the signature of the CUDA version requested from
// cuGetProcAddress (kDriverAbiVersion). A test can fill this table with fakes (set_driver_for_testing).
struct DriverApi {
  cu::Result (*cuInit)(unsigned flags) = nullptr;
  cu::Result (*cuDriverGetVersion)(int* version) = nullptr;
  cu::Result (*cuGetErrorName)(cu::Result, const char** name) = nullptr;
  cu::Result (*cuGetErrorString)(cu::Result, const char** text) = nullptr;
  cu::Result (*cuDeviceGetCount)(int* count) = nullptr;
  cu::Result (*cuDeviceGet)(cu::Device* dev, int ordinal) = nullptr;
  cu::Result (*cuDeviceGetName)(char* name, int len, cu::Device dev) = nullptr;
  cu::Result (*cuDeviceGetAttribute)(int* value, int attribute, cu::Device dev) = nullptr;
  cu::Result (*cuDeviceTotalMem)(size_t* bytes, cu::Device dev) = nullptr;
  cu::Result (*cuDevicePrimaryCtxRetain)(cu::Context* ctx, cu::Device dev) = nullptr;
  cu::Result (*cuDevicePrimaryCtxRelease)(cu::Device dev) = nullptr;
  cu::Result (*cuCtxGetCurrent)(cu::Context* ctx) = nullptr;
  cu::Result (*cuCtxGetDevice)(cu::Device* dev) = nullptr;
  cu::Result (*cuCtxPushCurrent)(cu::Context ctx) = nullptr;
  cu::Result (*cuCtxPopCurrent)(cu::Context* ctx) = nullptr;
  // CUDA 12.0; null when the driver has no such entry point (context_id() then answers 0).
  cu::Result (*cuCtxGetId)(cu::Context ctx, unsigned long long* id) = nullptr;
  cu::Result (*cuStreamCreate)(cu::Stream* stream, unsigned flags) = nullptr;
  cu::Result (*cuStreamDestroy)(cu::Stream stream) = nullptr;
  cu::Result (*cuStreamSynchronize)(cu::Stream stream) = nullptr;
  cu::Result (*cuStreamIsCapturing)(cu::Stream stream, int* status) = nullptr;  // CUstreamCaptureStatus
  cu::Result (*cuModuleLoadDataEx)(cu::Module* mod, const void* image, unsigned n_options, int* options,
                                   void** values) = nullptr;
  cu::Result (*cuModuleUnload)(cu::Module mod) = nullptr;
  cu::Result (*cuModuleGetFunction)(cu::Function* fn, cu::Module mod, const char* name) = nullptr;
  cu::Result (*cuFuncSetAttribute)(cu::Function fn, int attribute, int value) = nullptr;
  cu::Result (*cuFuncGetAttribute)(int* value, int attribute, cu::Function fn) = nullptr;
  cu::Result (*cuOccupancyMaxPotentialBlockSize)(int* min_grid, int* block, cu::Function fn,
                                                 cu::OccupancyB2DSize smem_fn, size_t smem,
                                                 int block_limit) = nullptr;
  cu::Result (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int* blocks, cu::Function fn, int block,
                                                            size_t smem) = nullptr;
  cu::Result (*cuLaunchKernel)(cu::Function fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned smem, cu::Stream stream, void** params,
                               void** extra) = nullptr;
  cu::Result (*cuMemAlloc)(cu::DevicePtr* ptr, size_t bytes) = nullptr;
  cu::Result (*cuMemFree)(cu::DevicePtr ptr) = nullptr;
  // Stream-ordered allocation (CUDA 11.2+), for the unfused path's intermediates on a caller's stream.
  cu::Result (*cuMemAllocAsync)(cu::DevicePtr* ptr, size_t bytes, cu::Stream s) = nullptr;
  cu::Result (*cuMemFreeAsync)(cu::DevicePtr ptr, cu::Stream s) = nullptr;
  cu::Result (*cuMemGetInfo)(size_t* free_bytes, size_t* total_bytes) = nullptr;
  cu::Result (*cuMemcpyHtoDAsync)(cu::DevicePtr dst, const void* src, size_t bytes, cu::Stream s) = nullptr;
  cu::Result (*cuMemcpyDtoHAsync)(void* dst, cu::DevicePtr src, size_t bytes, cu::Stream s) = nullptr;
  cu::Result (*cuMemcpyDtoDAsync)(cu::DevicePtr dst, cu::DevicePtr src, size_t bytes, cu::Stream s) = nullptr;
  cu::Result (*cuMemsetD8Async)(cu::DevicePtr dst, unsigned char value, size_t bytes, cu::Stream s) = nullptr;
  cu::Result (*cuEventCreate)(cu::Event* ev, unsigned flags) = nullptr;
  cu::Result (*cuEventDestroy)(cu::Event ev) = nullptr;
  cu::Result (*cuEventRecord)(cu::Event ev, cu::Stream s) = nullptr;
  cu::Result (*cuEventSynchronize)(cu::Event ev) = nullptr;
  cu::Result (*cuEventElapsedTime)(float* ms, cu::Event start, cu::Event end) = nullptr;
};

// The CUDA version whose ABI DriverApi's signatures follow; passed to cuGetProcAddress.
inline constexpr int kDriverAbiVersion = 12000;

// What went wrong, so callers (the public API, the CLI) can react without parsing messages.
enum class DriverErrorKind {
  NoDriver,      // libcuda.so.1 could not be loaded or lacks cuGetProcAddress_v2
  NoDevice,      // no CUDA device visible, or the requested ordinal does not exist
  PtxTooNew,     // CUDA_ERROR_UNSUPPORTED_PTX_VERSION: driver older than the NVRTC that made the PTX
  OutOfMemory,   // CUDA_ERROR_OUT_OF_MEMORY from an allocation
  BadArgument,   // refused before calling the driver (e.g. an output overlapping an input)
  Other,         // any other failing driver call
};

// A failed driver call or a missing driver/device. what() is one self-contained line (several for
// a module-load JIT log), e.g. "cuLaunchKernel failed for kernel fj_k_1a2b: CUDA_ERROR_INVALID_VALUE
// (invalid argument)".
class DriverError : public std::runtime_error {
 public:
  DriverError(DriverErrorKind kind, std::string message, cu::Result code = -1)
      : std::runtime_error(std::move(message)), kind_(kind), code_(code) {}
  DriverErrorKind kind() const { return kind_; }
  // The CUresult, or -1 when the error did not come from a driver call.
  cu::Result code() const { return code_; }

 private:
  DriverErrorKind kind_;
  cu::Result code_;
};

// The message for CUDA_ERROR_UNSUPPORTED_PTX_VERSION: "the driver (CUDA 12.4) is older than NVRTC
// (CUDA 13.0) that produced this PTX ...", with what to do about it. Versions as cuDriverGetVersion.
std::string ptx_too_new_message(int driver_version, int nvrtc_version);

// cuDriverGetVersion of a dlopen'ed libcuda (no cuInit needed), e.g. 12040; 0 when it fails.
int libcuda_version(void* handle);

// "CUDA 12.4" style text for a version number as cuDriverGetVersion / CUDA_VERSION give it
// (1000 * major + 10 * minor).
std::string cuda_version_string(int version);

// The loaded driver: one per process (or per test hook). Thread-safe after construction.
class Driver {
 public:
  // The process-wide driver, loaded on first use. Never throws: check available().
  static std::shared_ptr<const Driver> get();

  bool available() const { return available_; }
  // Why the driver is unavailable (one line, starting "no CUDA driver found: ..."); "" if available.
  const std::string& unavailable_reason() const { return reason_; }
  // The entry points. Throws DriverError(NoDriver) with unavailable_reason() if not available.
  const DriverApi& api() const;
  // cuDriverGetVersion, e.g. 13000; 0 if unavailable.
  int version() const { return version_; }

  // Throws DriverError if `r` is not success: "CALL failed[ for kernel KERNEL]: NAME (STRING)".
  // CUDA_ERROR_OUT_OF_MEMORY gives kind OutOfMemory, CUDA_ERROR_UNSUPPORTED_PTX_VERSION PtxTooNew.
  void check(cu::Result r, const char* call, std::string_view kernel = {}) const;
  // "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for a result code, from the driver's own tables.
  std::string describe(cu::Result r) const;

  // Loads from a library (for tests: a name that does not exist gives the "no driver" path).
  static std::shared_ptr<const Driver> load(const char* library = "libcuda.so.1");
  // Wraps a table of (fake) entry points; `version` is what cuDriverGetVersion would report.
  static std::shared_ptr<const Driver> from_api(const DriverApi& api, int version);
  ~Driver();

 private:
  Driver() = default;
  void* handle_ = nullptr;
  bool available_ = false;
  std::string reason_;
  int version_ = 0;
  DriverApi api_;
};

// Test hook: replaces the process-wide driver returned by Driver::get() (nullptr restores the
// default, loaded again on next use). Objects opened before keep the driver they were opened with.
void set_driver_for_testing(std::shared_ptr<const Driver> driver);

// What fusejit needs to know about a device. Plain data, so launch math is testable with a fake.
struct DeviceInfo {
  int ordinal = 0;
  std::string name;               // e.g. "NVIDIA H200"
  int cc_major = 0, cc_minor = 0; // compute capability, e.g. 9.0 -> sm_90
  int sm_count = 0;               // streaming multiprocessors
  int64_t l2_bytes = 0;           // L2 cache size in bytes
  int max_threads_per_block = 1024;
  int max_threads_per_sm = 2048;
  int max_blocks_per_sm = 32;
  // Shared memory a block may use once its function opts in (MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
  // bytes: 227 KiB on sm_90. Sizes the row cache (ir::row_cache_limit_for).
  int64_t shared_per_block_optin = 48 * 1024;
  int64_t total_memory = 0;       // bytes
  int driver_version = 0;         // cuDriverGetVersion, e.g. 13000
  // cuMemAllocAsync / cuMemFreeAsync work here (MEMORY_POOLS_SUPPORTED; not on some virtual GPUs):
  // else stream_alloc and stream_free fall back to cuMemAlloc and a synchronised cuMemFree.
  bool memory_pools = true;
  // "sm_90" from the compute capability.
  std::string sm_arch() const { return "sm_" + std::to_string(cc_major * 10 + cc_minor); }
};

// The driver's id of context `ctx` (cuCtxGetId, CUDA 12.0): "unique for the life of the program"
// (CUDA Driver API, Context Management), where a handle is not: a context made after another was
// destroyed can get its address. Caches of loaded modules key by both, so a module of a dead
// context is never found for a new one. 0 when the driver lacks cuCtxGetId. Throws DriverError
// (e.g. CUDA_ERROR_CONTEXT_IS_DESTROYED).
uint64_t context_id(const Driver& driver, cu::Context ctx);

// A device and the context fusejit works in. If the calling thread has a current context when
// open() is called (e.g. the CUDA runtime's primary context), that context is used as is and
// `ordinal` is ignored (the runtime and fusejit then share pointers and streams); otherwise the
// primary context of device `ordinal` is retained (and released by the destructor). Shared by the
// module cache, buffers and the runner; thread-safe.
class DeviceContext {
 public:
  // Throws DriverError: NoDriver, NoDevice ("no CUDA device found: ..." or "device 3 requested but
  // only 1 CUDA device is visible"), Other.
  static std::shared_ptr<DeviceContext> open(int ordinal = 0,
                                             std::shared_ptr<const Driver> driver = Driver::get());
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  const DeviceInfo& info() const { return info_; }
  cu::Context context() const { return ctx_; }
  // The driver's id of context(), unique for the life of the process (context_id()).
  uint64_t context_id() const { return ctx_id_; }
  const Driver& driver() const { return *driver_; }
  const std::shared_ptr<const Driver>& driver_ptr() const { return driver_; }
  const DriverApi& api() const { return driver_->api(); }
  bool borrowed_context() const { return !owns_primary_; }

  // Makes this context current on the calling thread for the scope (pushes only if another
  // context, or none, is current). All driver calls of fusejit happen inside such a scope.
  class Scope {
   public:
    explicit Scope(const DeviceContext& dc);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    const DeviceContext& dc_;
    bool pushed_ = false;
  };

 private:
  DeviceContext() = default;
  std::shared_ptr<const Driver> driver_;
  cu::Context ctx_ = nullptr;
  uint64_t ctx_id_ = 0;
  cu::Device dev_ = 0;
  bool owns_primary_ = false;
  DeviceInfo info_;
};

// Stream-ordered device memory for work queued on `stream` (context of `dc` current):
// cuMemAllocAsync and cuMemFreeAsync where the device has memory pools (DeviceInfo::memory_pools),
// else cuMemAlloc, and cuStreamSynchronize then cuMemFree (that launch waits for its kernels).
// `what` names the buffer in messages ("intermediate v3"). Throws DriverError: OutOfMemory ("out
// of device memory: cuMemAllocAsync of 1.0 MiB for intermediate v3 failed"), Other (the driver's
// error; a stream being captured into a CUDA graph on a device without pools, where neither
// cuMemAlloc nor the synchronisation may be captured). stream_free never throws.
cu::DevicePtr stream_alloc(const DeviceContext& dc, size_t bytes, cu::Stream stream, std::string_view what);
void stream_free(const DeviceContext& dc, cu::DevicePtr ptr, cu::Stream stream) noexcept;

// An owned device allocation (cuMemAlloc; never managed memory). Freed by the destructor.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // Allocates `bytes` (0 allocates nothing). Throws DriverError(OutOfMemory): "out of device
  // memory: cuMemAlloc of 12.0 GiB failed for WHAT (free 3.1 GiB of 139.8 GiB on NVIDIA H200)".
  DeviceBuffer(std::shared_ptr<DeviceContext> ctx, size_t bytes, std::string_view what = {});
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;

  cu::DevicePtr ptr() const { return ptr_; }
  size_t size() const { return bytes_; }

 private:
  void release() noexcept;
  std::shared_ptr<DeviceContext> ctx_;
  cu::DevicePtr ptr_ = 0;
  size_t bytes_ = 0;
};

// A stream of fusejit's own (cuStreamCreate, non-blocking) in a context that is current (inside a
// DeviceContext::Scope). The destructor synchronises it before destroying it, so no queued work
// outlives buffers declared before it; buffers declared after it are freed first when an
// exception unwinds (jit/gpu_runner.cpp's DrainOnUnwind waits for the stream before them).
class OwnedStream {
 public:
  explicit OwnedStream(const DeviceContext& dc);
  ~OwnedStream();
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  cu::Stream get() const { return s_; }

 private:
  const DeviceContext& dc_;
  cu::Stream s_ = nullptr;
};

// "12.0 GiB" / "512 B" text for byte counts in messages.
std::string format_bytes(uint64_t bytes);

}  // namespace fusejit::jit
