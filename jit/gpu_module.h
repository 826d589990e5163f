// Kernels on the GPU: loading CUBIN/PTX images as modules (cached per context and image hash),
// looking up functions with their occupancy-derived block size (computed once per kernel), the
// launch configuration for a grid-stride loop, and the checked launch itself.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "jit/driver.h"
#include "jit/kernel_abi.h"

namespace fusejit::jit {

// Grid and block of one launch of a grid-stride kernel. grid == 0 means "nothing to do" (0
// elements): the launch is skipped.
struct LaunchConfig {
  uint32_t grid = 0;
  uint32_t block = 0;
  uint32_t shared_bytes = 0;  // dynamic shared memory per block (a reduction's row cache), <= the device's row cache limit (ir::row_cache_limit_for)
  bool empty() const { return grid == 0; }
  LaunchShape shape() const { return LaunchShape{grid, block}; }
};

// The launch configuration for `elements` iterations of a grid-stride loop that handles
// `vector_width` elements per thread-iteration on the vector path (1 = scalar):
//   block = the occupancy API's block size (cuOccupancyMaxPotentialBlockSize), rounded down to a
//           multiple of the warp size (32) and clamped to [32, device max threads per block];
//           256 if the API gave nothing (<= 0);
//   grid  = min(ceil(ceil(elements / vector_width) / block), sm_count * blocks_per_sm)
//           (blocks_per_sm from cuOccupancyMaxActiveBlocksPerMultiprocessor, at least 1): enough
//           blocks to fill every SM once, never more than there is work for. The grid depends
//           only on the iteration space, never on an operand's size (a broadcast operand is
//           smaller than the iteration space).
// grid * block < 2^31 always holds (kernel_abi's requirement). Pure: testable with a fake device.
LaunchConfig choose_launch(const DeviceInfo& device, int max_block_from_occupancy, int blocks_per_sm,
                           int64_t elements, int vector_width);

// A kernel function in one context, with its occupancy data (queried once, at first lookup).
struct GpuFunction {
  cu::Function fn = nullptr;
  std::string name;
  int block = 256;         // cuOccupancyMaxPotentialBlockSize's block size
  int blocks_per_sm = 1;   // cuOccupancyMaxActiveBlocksPerMultiprocessor at that block size
  // choose_launch's numbers for this function on its device, computed once: the block size it
  // launches with and the most blocks a grid gets (SMs x resident blocks, and grid * block < 2^31).
  uint32_t launch_block = 256;
  int64_t max_grid = 1;
  // A function that may launch with dynamic shared memory (FunctionLimits::max_dynamic_shared):
  // max_grid_shared[k] is the grid cap with (k + 1) * kSharedStep bytes of it per block, from the
  // occupancy API queried with that much (a large row cache leaves room for fewer blocks per SM
  // than none does, so a grid sized without it would run in two waves).
  static constexpr uint32_t kSharedStep = 4096;
  std::vector<int64_t> max_grid_shared;
  // The dynamic shared memory a launch may ask for: FunctionLimits::max_dynamic_shared, less where
  // the function's static shared memory leaves less room under the device's opt-in maximum.
  int max_dynamic_shared = 0;
  // The grid cap of a launch with `shared_bytes` of dynamic shared memory per block: the cap at the
  // next step up (never more blocks than fit at once), max_grid without any.
  int64_t grid_cap(uint32_t shared_bytes) const {
    if (shared_bytes == 0 || max_grid_shared.empty()) return max_grid;
    const size_t k = (shared_bytes + kSharedStep - 1) / kSharedStep - 1;
    return max_grid_shared[std::min(k, max_grid_shared.size() - 1)];
  }
  // choose_launch(device, block, blocks_per_sm, elements, vector_width), from the numbers above,
  // for a launch with `shared_bytes` of dynamic shared memory per block (its grid cap: grid_cap).
  LaunchConfig config(int64_t elements, int vector_width, uint32_t shared_bytes = 0) const {
    LaunchConfig cfg;
    cfg.block = launch_block;
    cfg.shared_bytes = shared_bytes;
    if (elements <= 0) return cfg;
    const int64_t vw = vector_width > 1 ? vector_width : 1;
    const int64_t needed = ((elements + vw - 1) / vw + launch_block - 1) / launch_block;
    cfg.grid = static_cast<uint32_t>(std::max<int64_t>(1, std::min(needed, grid_cap(shared_bytes))));
    return cfg;
  }
};

// Loads `image` (a CUBIN, or PTX text including its final '\0', as NVRTC returns them) into the
// context of `dc` unless a module with the same XXH3-128 image hash is already loaded there, and
// returns the extern "C" kernel `name` from it. `target_name` ("sm_90", "compute_90") is used in
// messages. Thread-safe; modules stay loaded until clear_module_cache().
// Throws DriverError: PtxTooNew (CUDA_ERROR_UNSUPPORTED_PTX_VERSION: the message names the
// driver's and NVRTC's CUDA versions), Other for a CUBIN built for another architecture
// (CUDA_ERROR_NO_BINARY_FOR_GPU: names the target and the device's sm_XY), a PTX JIT failure
// (with the driver's JIT log) or a missing function.
// What a kernel needs of its launches, set once when its function is loaded.
//  - max_block > 0 caps the block size the occupancy API may choose (its blockSizeLimit): a
//    reduction kernel with one block per row gets kReduceMaxBlock, as its load passes keep only
//    FJ_RED_LANES threads busy, and its fast entry kReduceMaxBlock / V with a vector path of V
//    lanes a thread, except for launches that keep the row on chip (GpuProgram loads that entry
//    again with kReduceMaxBlock, and a third time with kReduceLongRowBlock for long rows; a
//    column kernel's rows share a block's threads: no cap);
//  - max_dynamic_shared > 0: launches may ask for that many bytes of dynamic shared memory (a row
//    cache, ir::row_cache_limit_for the device), opted in with cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES):
//    without it a block's static and dynamic shared memory together may not pass 48 KiB, and the
//    lane arrays are static. Every sm_75 and later GPU allows 64 KiB or more per block.
struct FunctionLimits {
  int max_block = 0;
  int max_dynamic_shared = 0;
};
GpuFunction load_function(const std::shared_ptr<DeviceContext>& dc, std::span<const char> image,
                          const std::string& target_name, const std::string& name, FunctionLimits limits = {});

// The largest block a reduction kernel with one block per row launches with: FJ_RED_LANES
// (ir/scalar/fj_reduce.h). In a pass over a row only the threads that own a lane load elements
// (element i goes to lane i mod 256), so a larger block would leave threads idle there while taking
// an SM's room for other rows' blocks. On an H200 (2026-12-04) it was the best or near it for rows
// of 4,096 on chip (128 ran within 3 % either way); shorter rows ran best with fewer threads, longer
// ones with more (kReduceLongRowBlock).
inline constexpr int kReduceMaxBlock = 256;
// The largest block of a launch that keeps rows of at least kLongRowElements on chip and writes
// element outputs (GroupLaunch::long_rows): such a row takes much of an SM's shared memory (all
// but one block's worth at 32,768 f32), so few blocks share an SM and only their own threads copy
// the rows in and write the outputs. The 16,384-element threshold is a choice between the two
// lengths measured (4,096 ran best at 256, 32,768 at 1,024). Measured on an
// H200 (2026-12-04, docs/performance.md: block sizes 64 to 1024 at rows of 1,024, 4,096 and
// 32,768): rows of 32,768 f32/bf16 elements ran at 56 -> 63 % (RMSNorm), 35 -> 45 % (LayerNorm)
// and 36 -> 38 % (softmax) of the copy bandwidth with 1024 threads instead of 256; logsumexp over
// rows of 32,000 (row outputs only) lost 73 -> 68 %, so kernels without element outputs keep 256.
inline constexpr int kReduceLongRowBlock = 1024;

// Unloads every cached module (for tests, and before a borrowed context is destroyed).
void clear_module_cache();
// Number of modules currently loaded through the cache (for tests).
size_t module_cache_size();

// Enqueues one launch of `fn` with packed arguments on `stream` (in dc's context). Errors name the
// kernel: "cuLaunchKernel failed for kernel fj_k_...: CUDA_ERROR_...".
void launch_kernel(const DeviceContext& dc, const GpuFunction& fn, const LaunchConfig& cfg, void** args,
                   cu::Stream stream);
inline void launch_kernel(const DeviceContext& dc, const GpuFunction& fn, const LaunchConfig& cfg, PackedArgs& args,
                          cu::Stream stream) {
  launch_kernel(dc, fn, cfg, args.params(), stream);
}

}  // namespace fusejit::jit
