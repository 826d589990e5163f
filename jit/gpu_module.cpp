// Module cache, occupancy and launch. See gpu_module.h.
#include "jit/gpu_module.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include <fmt/format.h>

#include "jit/hash.h"

namespace fusejit::jit {

LaunchConfig choose_launch(const DeviceInfo& device, int max_block_from_occupancy, int blocks_per_sm,
                           int64_t elements, int vector_width) {
  LaunchConfig cfg;
  const int max_block = std::max(32, device.max_threads_per_block > 0 ? device.max_threads_per_block : 1024);
  int block = max_block_from_occupancy > 0 ? max_block_from_occupancy : 256;
  block = std::clamp(block / 32 * 32, 32, max_block / 32 * 32);
  cfg.block = static_cast<uint32_t>(block);
  if (elements <= 0) return cfg;  // grid 0: nothing to launch
  const int64_t vw = std::max(1, vector_width);
  const int64_t items = (elements + vw - 1) / vw;
  const int64_t needed = (items + block - 1) / block;
  const int64_t resident = int64_t{std::max(1, device.sm_count)} * std::max(1, blocks_per_sm);
  int64_t grid = std::min(needed, resident);
  // kernel_abi requires grid * block < 2^31 (the 32-bit grid-stride step must not overflow).
  grid = std::min(grid, ((int64_t{1} << 31) - 1) / block);
  cfg.grid = static_cast<uint32_t>(std::max<int64_t>(grid, 1));
  return cfg;
}

namespace {

struct ModuleEntry {
  std::shared_ptr<DeviceContext> dc;  // keeps the context (and its driver) alive while loaded
  cu::Module module = nullptr;
  // By name and limits: one function loaded with two limits (a fast entry's block with and without
  // the row on chip) has two launch shapes.
  std::map<std::tuple<std::string, int, int>, GpuFunction> functions;
};

// The context by handle and id (context_id: a handle can name a later context).
using ModuleKey = std::tuple<const Driver*, cu::Context, uint64_t, Hash128>;

std::mutex g_modules_mutex;
std::map<ModuleKey, ModuleEntry> g_modules;  // guarded by g_modules_mutex

cu::Module load_module(const DeviceContext& dc, std::span<const char> image, const std::string& target_name,
                       const std::string& kernel) {
  const DriverApi& a = dc.api();
  // The driver's JIT error log (meaningful for PTX; harmless for CUBIN).
  char log[8192] = {};
  int options[2] = {cu::kJitErrorLogBuffer, cu::kJitErrorLogBufferSizeBytes};
  void* values[2] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof(log) - 1))};
  cu::Module mod = nullptr;
  cu::Result r = a.cuModuleLoadDataEx(&mod, image.data(), 2, options, values);
  if (r == cu::kSuccess) return mod;
  const std::string what =
      fmt::format("cuModuleLoadData ({} image with kernel {}, device {})", target_name, kernel, dc.info().sm_arch());
  // A CUBIN for this very GPU that the driver refuses was built by a newer CUDA major than the
  // driver's (CUDA Compatibility: minor version compatibility holds within one major version). The
  // NVRTC that built it is not known here (a cache entry or an ahead-of-time folder).
  const bool this_gpu = target_name.rfind(dc.info().sm_arch(), 0) == 0;  // sm_90, sm_90a on sm_90
  if (this_gpu && (r == cu::kErrorNoBinaryForGpu || r == cu::kErrorInvalidImage))
    throw DriverError(DriverErrorKind::PtxTooNew,
                      fmt::format("{} failed: the image was built for this GPU ({}), so the driver ({}) is likely older "
                                  "than the CUDA toolkit (NVRTC) that built it: install an NVIDIA driver for that CUDA "
                                  "version or newer, or build with an NVRTC no newer than the driver: {}",
                                  what, target_name, cuda_version_string(dc.driver().version()), dc.driver().describe(r)),
                      r);
  if (r == cu::kErrorNoBinaryForGpu)
    throw DriverError(DriverErrorKind::Other,
                      fmt::format("{} failed: the image was compiled for {} and does not run on {} ({}): {}", what,
                                  target_name, dc.info().name, dc.info().sm_arch(), dc.driver().describe(r)),
                      r);
  if (r != cu::kErrorUnsupportedPtxVersion && log[0] != '\0') {
    try {
      dc.driver().check(r, what.c_str());
    } catch (const DriverError& e) {
      throw DriverError(e.kind(), fmt::format("{}\ndriver JIT log:\n{}", e.what(), log), r);
    }
  }
  dc.driver().check(r, what.c_str());
  return mod;  // not reached
}

// Drops the entries of a context destroyed at `dc`'s handle (another id): their modules went with
// it, and unloading them could unload the later context's (handles are reused too). Lock held.
void forget_dead_context(const DeviceContext& dc) {
  const ModuleKey first{&dc.driver(), dc.context(), 0, Hash128{}};
  for (auto it = g_modules.lower_bound(first);
       it != g_modules.end() && std::get<0>(it->first) == &dc.driver() && std::get<1>(it->first) == dc.context();)
    it = std::get<2>(it->first) != dc.context_id() ? g_modules.erase(it) : std::next(it);
}

}  // namespace

GpuFunction load_function(const std::shared_ptr<DeviceContext>& dc, std::span<const char> image,
                          const std::string& target_name, const std::string& name, FunctionLimits limits) {
  DeviceContext::Scope scope(*dc);
  const ModuleKey key{&dc->driver(), dc->context(), dc->context_id(),
                      xxh3_128(std::string_view(image.data(), image.size()))};
  std::lock_guard lock(g_modules_mutex);
  auto it = g_modules.find(key);
  if (it == g_modules.end()) {
    forget_dead_context(*dc);
    ModuleEntry e;
    e.dc = dc;
    e.module = load_module(*dc, image, target_name, name);
    it = g_modules.emplace(key, std::move(e)).first;
  }
  ModuleEntry& e = it->second;
  const std::tuple<std::string, int, int> fkey{name, limits.max_block, limits.max_dynamic_shared};
  if (auto f = e.functions.find(fkey); f != e.functions.end()) return f->second;
  const DriverApi& a = dc->api();
  const Driver& d = dc->driver();
  GpuFunction fn;
  fn.name = name;
  d.check(a.cuModuleGetFunction(&fn.fn, e.module, name.c_str()), "cuModuleGetFunction", name);
  int min_grid = 0, block = 0;
  if (limits.max_dynamic_shared > 0) {
    // Static and dynamic shared memory together may not pass the opt-in maximum: a kernel whose
    // static shared memory is over ir::kRowCacheStaticReserve gets less (its row cache limit, too).
    int static_shared = 0;
    d.check(a.cuFuncGetAttribute(&static_shared, cu::kFuncAttrSharedSizeBytes, fn.fn), "cuFuncGetAttribute", name);
    const int64_t room = dc->info().shared_per_block_optin - static_shared;
    limits.max_dynamic_shared = static_cast<int>(std::clamp<int64_t>(room, 0, limits.max_dynamic_shared));
    if (limits.max_dynamic_shared > 0)
      d.check(a.cuFuncSetAttribute(fn.fn, cu::kFuncAttrMaxDynamicSharedSizeBytes, limits.max_dynamic_shared),
              "cuFuncSetAttribute", name);
  }
  fn.max_dynamic_shared = limits.max_dynamic_shared;
  d.check(a.cuOccupancyMaxPotentialBlockSize(&min_grid, &block, fn.fn, nullptr, 0, std::max(0, limits.max_block)),
          "cuOccupancyMaxPotentialBlockSize", name);
  fn.block = block > 0 ? block : 256;
  int per_sm = 0;
  d.check(a.cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn.fn, fn.block, 0),
          "cuOccupancyMaxActiveBlocksPerMultiprocessor", name);
  fn.blocks_per_sm = std::max(1, per_sm);
  // choose_launch's block and grid cap, so a launch only divides the element count.
  const LaunchConfig widest = choose_launch(dc->info(), fn.block, fn.blocks_per_sm, int64_t{1} << 62, 1);
  fn.launch_block = widest.block;
  fn.max_grid = widest.grid;
  for (int shared = GpuFunction::kSharedStep; shared <= limits.max_dynamic_shared; shared += GpuFunction::kSharedStep) {
    d.check(a.cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn.fn, fn.block, static_cast<size_t>(shared)),
            "cuOccupancyMaxActiveBlocksPerMultiprocessor", name);
    fn.max_grid_shared.push_back(choose_launch(dc->info(), fn.block, std::max(1, per_sm), int64_t{1} << 62, 1).grid);
  }
  e.functions.emplace(fkey, fn);
  return fn;
}

void clear_module_cache() {
  std::map<ModuleKey, ModuleEntry> old;
  {
    std::lock_guard lock(g_modules_mutex);
    old.swap(g_modules);
  }
  for (auto& [key, e] : old) {
    try {
      // A destroyed context took its modules with it, and its handle (and the module's) may name
      // live ones of a later context now: unload only in the context the module was loaded in.
      if (e.dc->context_id() != jit::context_id(e.dc->driver(), e.dc->context())) continue;
      DeviceContext::Scope scope(*e.dc);
      e.dc->api().cuModuleUnload(e.module);
    } catch (const DriverError&) {
      // The context is already gone (e.g. a caller destroyed it): nothing left to unload.
    }
  }
}

size_t module_cache_size() {
  std::lock_guard lock(g_modules_mutex);
  return g_modules.size();
}

void launch_kernel(const DeviceContext& dc, const GpuFunction& fn, const LaunchConfig& cfg, void** args,
                   cu::Stream stream) {
  if (cfg.empty()) return;
  dc.driver().check(dc.api().cuLaunchKernel(fn.fn, cfg.grid, 1, 1, cfg.block, 1, 1, cfg.shared_bytes, stream, args, nullptr),
                    "cuLaunchKernel", fn.name);
}

}  // namespace fusejit::jit
