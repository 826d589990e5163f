// A fake CUDA driver for tests without a GPU: a DriverApi table whose entry points act on host
// memory (device pointers are host pointers), record launches, run registered host emulations of
// kernels, and return injected errors. Single-threaded tests only; reset() before each use.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "jit/driver.h"

namespace fake_cuda {

using namespace fusejit::jit;

struct Launch {
  std::string kernel;
  unsigned grid = 0, block = 0;
  cu::Stream stream = nullptr;
  unsigned shared_bytes = 0;  // dynamic shared memory per block
};

struct FakeEvent {
  long long t = -1;
};

struct State {
  // Device description.
  int device_count = 1;
  std::string name = "Fake H200";
  int cc_major = 9, cc_minor = 0, sm_count = 132, l2 = 50 * 1024 * 1024;
  size_t total = size_t{80} << 30, free = size_t{1} << 30;
  // Injected results (0 = success).
  cu::Result init_result = 0, alloc_result = 0, load_result = 0, launch_result = 0;
  int allocs_before_oom = -1;  // >= 0: that many more allocations succeed, then out of memory
  // Occupancy answers.
  int occ_block = 768, occ_blocks_per_sm = 2;
  int memory_pools = 1;  // MEMORY_POOLS_SUPPORTED: 0 as some virtual GPUs (no cuMemAllocAsync)
  int capturing = 0;     // cuStreamIsCapturing's status (1: active); cuStreamSynchronize then fails (900)
  // Recorded activity.
  std::vector<Launch> launches;
  std::set<void*> live;        // live allocations
  int modules_loaded = 0;
  std::deque<std::string> function_names;  // stable storage: a CUfunction is a pointer to its name
  // Host emulations by name: (params, the launch's grid and block (threads), its dynamic shared
  // memory bytes). Empty: launches run nothing; else a launch of a kernel not here fails
  // (CUDA_ERROR_NOT_FOUND), so an entry point the emulation missed cannot pass unseen.
  std::map<std::string, std::function<void(void**, unsigned grid, unsigned block, unsigned shared)>> kernels;
  long long clock = 0;         // advanced by every event record and launch
  double ms_per_tick = 0.25;
  cu::Context current = nullptr;
  std::vector<cu::Context> stack;
  // cuCtxGetId's answers, given at a context's first query; recreate_context() gives a handle a
  // new one, as a context made at a destroyed one's address.
  std::map<cu::Context, unsigned long long> context_ids;
  unsigned long long next_context_id = 1;
  // Every driver call by name, while `record` is set (reserve `calls` first to keep a test free of
  // allocations). `keep_launches` = false stops recording Launch entries (they hold strings).
  bool record = false;
  std::vector<const char*> calls;
  bool keep_launches = true;
  std::map<cu::Context, int> modules_per_context;  // modules loaded while each context was current
  // Shared memory, as the driver checks it: every kernel has `static_shared` bytes of static shared
  // memory (fusejit's lane arrays: 2,048 B in NVRTC's sm_90 CUBINs), and a launch may add dynamic
  // shared memory up to 48 KiB in all, or up to the function's MAX_DYNAMIC_SHARED_SIZE_BYTES once
  // cuFuncSetAttribute raised it.
  unsigned static_shared = 2048;
  // Shared memory per SM the occupancy answers count blocks with dynamic shared memory against
  // (static + dynamic bytes per block); 0: occ_blocks_per_sm whatever the launch asks for.
  unsigned shared_per_sm = 0;
  std::map<std::string, int> max_dynamic_shared;  // by function name
  // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: a function may opt in to this less its static shared memory
  // (more is CUDA_ERROR_INVALID_VALUE). 99 KiB, as sm_86/89.
  unsigned shared_optin = 99 * 1024;
};

inline State& st() {
  static State s;
  return s;
}
inline cu::Context primary() { return reinterpret_cast<cu::Context>(0x1000); }
inline void note(const char* call) {
  if (st().record) st().calls.push_back(call);
}

inline cu::Result init(unsigned) { note("cuInit"); return st().init_result; }
inline cu::Result driver_version(int* v) { note("cuDriverGetVersion"); *v = 12040; return 0; }
inline cu::Result error_name(cu::Result r, const char** s) { note("cuGetErrorName");
  switch (r) {
    case 0: *s = "CUDA_SUCCESS"; return 0;
    case 1: *s = "CUDA_ERROR_INVALID_VALUE"; return 0;
    case 2: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
    case 100: *s = "CUDA_ERROR_NO_DEVICE"; return 0;
    case 209: *s = "CUDA_ERROR_NO_BINARY_FOR_GPU"; return 0;
    case 222: *s = "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"; return 0;
    default: return 1;
  }
}
inline cu::Result error_string(cu::Result r, const char** s) { note("cuGetErrorString");
  switch (r) {
    case 0: *s = "no error"; return 0;
    case 1: *s = "invalid argument"; return 0;
    case 2: *s = "out of memory"; return 0;
    case 100: *s = "no CUDA-capable device is detected"; return 0;
    case 209: *s = "no kernel image is available for execution on the device"; return 0;
    case 222: *s = "the provided PTX was compiled with an unsupported toolchain."; return 0;
    default: return 1;
  }
}
inline cu::Result device_count(int* n) { note("cuDeviceGetCount"); *n = st().device_count; return 0; }
inline cu::Result device_get(cu::Device* d, int ordinal) { note("cuDeviceGet"); *d = ordinal; return 0; }
inline cu::Result device_name(char* name, int len, cu::Device) { note("cuDeviceGetName");
  std::strncpy(name, st().name.c_str(), static_cast<size_t>(len));
  return 0;
}
inline cu::Result device_attr(int* v, int attr, cu::Device) { note("cuDeviceGetAttribute");
  switch (attr) {
    case cu::kAttrComputeCapabilityMajor: *v = st().cc_major; return 0;
    case cu::kAttrComputeCapabilityMinor: *v = st().cc_minor; return 0;
    case cu::kAttrMultiprocessorCount: *v = st().sm_count; return 0;
    case cu::kAttrL2CacheSize: *v = st().l2; return 0;
    case cu::kAttrMaxThreadsPerBlock: *v = 1024; return 0;
    case cu::kAttrMaxThreadsPerMultiprocessor: *v = 2048; return 0;
    case cu::kAttrMaxBlocksPerMultiprocessor: *v = 32; return 0;
    case cu::kAttrMaxSharedMemoryPerBlockOptin: *v = static_cast<int>(st().shared_optin); return 0;
    case cu::kAttrMemoryPoolsSupported: *v = st().memory_pools; return 0;
    default: return 1;
  }
}
inline cu::Result total_mem(size_t* b, cu::Device) { note("cuDeviceTotalMem"); *b = st().total; return 0; }
inline cu::Result retain(cu::Context* c, cu::Device) { note("cuDevicePrimaryCtxRetain"); *c = primary(); return 0; }
inline cu::Result release(cu::Device) { note("cuDevicePrimaryCtxRelease"); return 0; }
inline cu::Result ctx_current(cu::Context* c) { note("cuCtxGetCurrent"); *c = st().current; return 0; }
inline cu::Result ctx_device(cu::Device* d) { note("cuCtxGetDevice"); *d = 0; return 0; }
inline cu::Result ctx_push(cu::Context c) { note("cuCtxPushCurrent");
  st().stack.push_back(st().current);
  st().current = c;
  return 0;
}
inline cu::Result ctx_pop(cu::Context* c) { note("cuCtxPopCurrent");
  if (st().stack.empty()) return 1;
  *c = st().current;
  st().current = st().stack.back();
  st().stack.pop_back();
  return 0;
}
inline cu::Result ctx_id(cu::Context c, unsigned long long* id) { note("cuCtxGetId");
  if (c == nullptr) c = st().current;
  if (c == nullptr) return 201;  // CUDA_ERROR_INVALID_CONTEXT
  auto [it, fresh] = st().context_ids.try_emplace(c, 0);
  if (fresh) it->second = st().next_context_id++;
  *id = it->second;
  return 0;
}
// Context `c` destroyed and another made at its address (its modules are gone).
inline void recreate_context(cu::Context c) {
  st().context_ids[c] = st().next_context_id++;
}
inline cu::Result stream_create(cu::Stream* s, unsigned) { note("cuStreamCreate"); *s = reinterpret_cast<cu::Stream>(new int(0)); return 0; }
inline cu::Result stream_destroy(cu::Stream s) { note("cuStreamDestroy"); delete reinterpret_cast<int*>(s); return 0; }
inline cu::Result stream_sync(cu::Stream) { note("cuStreamSynchronize"); return st().capturing ? 900 : 0; }
inline cu::Result stream_capturing(cu::Stream, int* status) { note("cuStreamIsCapturing"); *status = st().capturing; return 0; }
inline cu::Result module_load(cu::Module* m, const void*, unsigned, int*, void**) { note("cuModuleLoadDataEx");
  if (st().load_result) return st().load_result;
  ++st().modules_loaded;
  ++st().modules_per_context[st().current];
  // A handle, not memory: a destroyed context's modules are never unloaded (recreate_context).
  *m = reinterpret_cast<cu::Module>(static_cast<uintptr_t>(0x100000 + st().modules_loaded));
  return 0;
}
inline cu::Result module_unload(cu::Module) { note("cuModuleUnload"); return 0; }
inline cu::Result get_function(cu::Function* f, cu::Module, const char* name) { note("cuModuleGetFunction");
  st().function_names.emplace_back(name);
  *f = reinterpret_cast<cu::Function>(&st().function_names.back());
  return 0;
}
inline cu::Result func_set_attribute(cu::Function f, int attribute, int value) { note("cuFuncSetAttribute");
  if (attribute != cu::kFuncAttrMaxDynamicSharedSizeBytes || value < 0) return cu::kErrorInvalidValue;
  if (static_cast<unsigned>(value) > st().shared_optin - st().static_shared) return cu::kErrorInvalidValue;
  st().max_dynamic_shared[*reinterpret_cast<std::string*>(f)] = value;
  return 0;
}
inline cu::Result func_get_attribute(int* value, int attribute, cu::Function) { note("cuFuncGetAttribute");
  if (attribute != cu::kFuncAttrSharedSizeBytes) return cu::kErrorInvalidValue;
  *value = static_cast<int>(st().static_shared);
  return 0;
}
inline cu::Result occ_block(int* min_grid, int* block, cu::Function, cu::OccupancyB2DSize, size_t, int limit) { note("cuOccupancyMaxPotentialBlockSize");
  *block = limit > 0 && limit < st().occ_block ? limit : st().occ_block;  // blockSizeLimit, as the driver
  *min_grid = st().sm_count * st().occ_blocks_per_sm;
  return 0;
}
inline cu::Result occ_per_sm(int* n, cu::Function, int, size_t dynamic_shared) {
  note("cuOccupancyMaxActiveBlocksPerMultiprocessor");
  *n = st().occ_blocks_per_sm;
  if (st().shared_per_sm > 0 && dynamic_shared > 0)  // as many blocks as their shared memory fits
    *n = std::min(*n, static_cast<int>(st().shared_per_sm / (st().static_shared + dynamic_shared)));
  return 0;
}
inline cu::Result launch(cu::Function f, unsigned gx, unsigned, unsigned, unsigned bx, unsigned, unsigned,
                         unsigned shared, cu::Stream s, void** params, void**) { note("cuLaunchKernel");
  if (st().launch_result) return st().launch_result;
  const std::string& name = *reinterpret_cast<std::string*>(f);
  const auto opted = st().max_dynamic_shared.find(name);
  if (shared > (opted != st().max_dynamic_shared.end() ? static_cast<unsigned>(opted->second) : 48 * 1024 - st().static_shared))
    return cu::kErrorInvalidValue;  // what the driver answers a launch over the shared memory limit
  if (st().keep_launches) st().launches.push_back({name, gx, bx, s, shared});
  ++st().clock;
  if (auto it = st().kernels.find(name); it != st().kernels.end()) {
    it->second(params, gx, bx, shared);
  } else if (!st().kernels.empty()) {
    return cu::kErrorNotFound;  // kernels are emulated, but not this one: a launch that would do nothing
  }
  return 0;
}
inline cu::Result alloc_impl(cu::DevicePtr* p, size_t bytes) {
  if (st().alloc_result) return st().alloc_result;
  if (st().allocs_before_oom == 0) return cu::kErrorOutOfMemory;
  if (st().allocs_before_oom > 0) --st().allocs_before_oom;
  void* h = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  st().live.insert(h);
  *p = reinterpret_cast<cu::DevicePtr>(h);
  return 0;
}
inline cu::Result free_impl(cu::DevicePtr p) {
  void* h = reinterpret_cast<void*>(p);
  if (!st().live.erase(h)) return 1;
  std::free(h);
  return 0;
}
inline cu::Result mem_alloc(cu::DevicePtr* p, size_t bytes) { note("cuMemAlloc"); return alloc_impl(p, bytes); }
inline cu::Result mem_free(cu::DevicePtr p) { note("cuMemFree"); return free_impl(p); }
inline cu::Result mem_alloc_async(cu::DevicePtr* p, size_t bytes, cu::Stream) { note("cuMemAllocAsync");
  return st().memory_pools ? alloc_impl(p, bytes) : 801;  // CUDA_ERROR_NOT_SUPPORTED
}
inline cu::Result mem_free_async(cu::DevicePtr p, cu::Stream) { note("cuMemFreeAsync");
  return st().memory_pools ? free_impl(p) : 801;
}
inline cu::Result mem_info(size_t* f, size_t* t) { note("cuMemGetInfo"); *f = st().free; *t = st().total; return 0; }
inline cu::Result htod(cu::DevicePtr d, const void* s, size_t n, cu::Stream) { note("cuMemcpyHtoDAsync");
  std::memcpy(reinterpret_cast<void*>(d), s, n);
  return 0;
}
inline cu::Result dtoh(void* d, cu::DevicePtr s, size_t n, cu::Stream) { note("cuMemcpyDtoHAsync");
  std::memcpy(d, reinterpret_cast<void*>(s), n);
  return 0;
}
inline cu::Result dtod(cu::DevicePtr d, cu::DevicePtr s, size_t n, cu::Stream) { note("cuMemcpyDtoDAsync");
  std::memcpy(reinterpret_cast<void*>(d), reinterpret_cast<void*>(s), n);
  ++st().clock;
  return 0;
}
inline cu::Result memset8(cu::DevicePtr d, unsigned char v, size_t n, cu::Stream) { note("cuMemsetD8Async");
  std::memset(reinterpret_cast<void*>(d), v, n);
  return 0;
}
inline cu::Result event_create(cu::Event* e, unsigned) { note("cuEventCreate"); *e = reinterpret_cast<cu::Event>(new FakeEvent); return 0; }
inline cu::Result event_destroy(cu::Event e) { note("cuEventDestroy"); delete reinterpret_cast<FakeEvent*>(e); return 0; }
inline cu::Result event_record(cu::Event e, cu::Stream) { note("cuEventRecord");
  reinterpret_cast<FakeEvent*>(e)->t = ++st().clock;
  return 0;
}
inline cu::Result event_sync(cu::Event) { note("cuEventSynchronize"); return 0; }
inline cu::Result event_elapsed(float* ms, cu::Event a, cu::Event b) { note("cuEventElapsedTime");
  auto* x = reinterpret_cast<FakeEvent*>(a);
  auto* y = reinterpret_cast<FakeEvent*>(b);
  if (x->t < 0 || y->t < 0) return 1;
  *ms = static_cast<float>((y->t - x->t) * st().ms_per_tick);
  return 0;
}

inline DriverApi api() {
  DriverApi a;
  a.cuInit = init;
  a.cuDriverGetVersion = driver_version;
  a.cuGetErrorName = error_name;
  a.cuGetErrorString = error_string;
  a.cuDeviceGetCount = device_count;
  a.cuDeviceGet = device_get;
  a.cuDeviceGetName = device_name;
  a.cuDeviceGetAttribute = device_attr;
  a.cuDeviceTotalMem = total_mem;
  a.cuDevicePrimaryCtxRetain = retain;
  a.cuDevicePrimaryCtxRelease = release;
  a.cuCtxGetCurrent = ctx_current;
  a.cuCtxGetDevice = ctx_device;
  a.cuCtxPushCurrent = ctx_push;
  a.cuCtxPopCurrent = ctx_pop;
  a.cuCtxGetId = ctx_id;
  a.cuStreamCreate = stream_create;
  a.cuStreamDestroy = stream_destroy;
  a.cuStreamSynchronize = stream_sync;
  a.cuStreamIsCapturing = stream_capturing;
  a.cuModuleLoadDataEx = module_load;
  a.cuModuleUnload = module_unload;
  a.cuModuleGetFunction = get_function;
  a.cuFuncSetAttribute = func_set_attribute;
  a.cuFuncGetAttribute = func_get_attribute;
  a.cuOccupancyMaxPotentialBlockSize = occ_block;
  a.cuOccupancyMaxActiveBlocksPerMultiprocessor = occ_per_sm;
  a.cuLaunchKernel = launch;
  a.cuMemAlloc = mem_alloc;
  a.cuMemFree = mem_free;
  a.cuMemAllocAsync = mem_alloc_async;
  a.cuMemFreeAsync = mem_free_async;
  a.cuMemGetInfo = mem_info;
  a.cuMemcpyHtoDAsync = htod;
  a.cuMemcpyDtoHAsync = dtoh;
  a.cuMemcpyDtoDAsync = dtod;
  a.cuMemsetD8Async = memset8;
  a.cuEventCreate = event_create;
  a.cuEventDestroy = event_destroy;
  a.cuEventRecord = event_record;
  a.cuEventSynchronize = event_sync;
  a.cuEventElapsedTime = event_elapsed;
  return a;
}

// A fresh fake driver (CUDA 12.4) with default state.
inline std::shared_ptr<const Driver> reset() {
  st() = State{};
  return Driver::from_api(api(), 12040);
}

}  // namespace fake_cuda
