// Compile-time check that the Driver API constants declared in driver.h match cuda.h. cuda.h is
// included for its declarations only (after driver.h, so its cuMemAlloc -> cuMemAlloc_v2 style
// macros cannot rename DriverApi's members); libcuda is never linked.
#include "jit/driver.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <type_traits>

namespace fusejit::jit::cu {
static_assert(CUDA_SUCCESS == kSuccess && CUDA_ERROR_INVALID_VALUE == kErrorInvalidValue);
static_assert(CUDA_ERROR_OUT_OF_MEMORY == kErrorOutOfMemory && CUDA_ERROR_NOT_INITIALIZED == kErrorNotInitialized);
static_assert(CUDA_ERROR_NO_DEVICE == kErrorNoDevice && CUDA_ERROR_INVALID_DEVICE == kErrorInvalidDevice);
static_assert(CUDA_ERROR_NO_BINARY_FOR_GPU == kErrorNoBinaryForGpu && CUDA_ERROR_INVALID_PTX == kErrorInvalidPtx);
static_assert(CUDA_ERROR_UNSUPPORTED_PTX_VERSION == kErrorUnsupportedPtxVersion);
static_assert(CUDA_ERROR_NOT_FOUND == kErrorNotFound && CUDA_ERROR_INVALID_IMAGE == kErrorInvalidImage);
static_assert(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK == kAttrMaxThreadsPerBlock);
static_assert(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT == kAttrMultiprocessorCount);
static_assert(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE == kAttrL2CacheSize);
static_assert(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR == kAttrMaxThreadsPerMultiprocessor);
static_assert(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR == kAttrComputeCapabilityMajor);
static_assert(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR == kAttrComputeCapabilityMinor);
static_assert(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR == kAttrMaxBlocksPerMultiprocessor);
static_assert(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN == kAttrMaxSharedMemoryPerBlockOptin);
static_assert(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED == kAttrMemoryPoolsSupported);
static_assert(CU_JIT_ERROR_LOG_BUFFER == kJitErrorLogBuffer);
static_assert(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES == kFuncAttrMaxDynamicSharedSizeBytes);
static_assert(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES == kFuncAttrSharedSizeBytes);
static_assert(sizeof(CUfunction_attribute) == sizeof(int));
static_assert(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES == kJitErrorLogBufferSizeBytes);
// The opaque handles are the same types as cuda.h's, and the scalar types have the same ABI.
static_assert(std::is_same_v<Context, CUcontext> && std::is_same_v<Module, CUmodule>);
static_assert(std::is_same_v<Function, CUfunction> && std::is_same_v<Stream, CUstream>);
static_assert(std::is_same_v<Event, CUevent> && std::is_same_v<DevicePtr, CUdeviceptr>);
static_assert(std::is_same_v<Device, CUdevice> && sizeof(Result) == sizeof(CUresult));
static_assert(std::is_same_v<OccupancyB2DSize, CUoccupancyB2DSize>);
}  // namespace fusejit::jit::cu

// Each DriverApi entry point has the ABI of the version cuGetProcAddress returns at
// kDriverAbiVersion (12000): the PFN_<name>_v<N> of cudaTypedefs.h named below, chosen by hand as
// the newest with N <= 12000. Same number of arguments, and each argument (and the result) of the
// same size and kind (pointer, floating point, integer or enum). A newer version of an entry point
// with another ABI (cuCtxGetDevice_v13000) would not be caught by these: the last assertion
// is the guard, and raising kDriverAbiVersion means choosing every version below again.
namespace fusejit::jit {
namespace {
template <class T>
constexpr int abi_kind() {
  if constexpr (std::is_pointer_v<T>) return 1;
  else if constexpr (std::is_floating_point_v<T>) return 2;
  else return 3;
}
template <class A, class B>
constexpr bool same_arg() {
  return sizeof(A) == sizeof(B) && abi_kind<A>() == abi_kind<B>();
}
template <class F, class G>
struct SameAbi : std::false_type {};
template <class R1, class... A1, class R2, class... A2>
struct SameAbi<R1 (*)(A1...), R2 (*)(A2...)> {
  static constexpr bool value = [] {
    if constexpr (sizeof...(A1) != sizeof...(A2)) return false;
    else return same_arg<R1, R2>() && (same_arg<A1, A2>() && ...);
  }();
};
}  // namespace
// cuda.h renames some entry points by macro (cuMemAlloc -> cuMemAlloc_v2): not DriverApi's members.
#undef cuInit
#undef cuDriverGetVersion
#undef cuGetErrorName
#undef cuGetErrorString
#undef cuDeviceGetCount
#undef cuDeviceGet
#undef cuDeviceGetName
#undef cuDeviceGetAttribute
#undef cuDeviceTotalMem
#undef cuDevicePrimaryCtxRetain
#undef cuDevicePrimaryCtxRelease
#undef cuCtxGetCurrent
#undef cuCtxGetDevice
#undef cuCtxPushCurrent
#undef cuCtxPopCurrent
#undef cuCtxGetId
#undef cuStreamCreate
#undef cuStreamDestroy
#undef cuStreamSynchronize
#undef cuStreamIsCapturing
#undef cuModuleLoadDataEx
#undef cuModuleUnload
#undef cuModuleGetFunction
#undef cuFuncSetAttribute
#undef cuFuncGetAttribute
#undef cuOccupancyMaxPotentialBlockSize
#undef cuOccupancyMaxActiveBlocksPerMultiprocessor
#undef cuLaunchKernel
#undef cuMemAlloc
#undef cuMemFree
#undef cuMemAllocAsync
#undef cuMemFreeAsync
#undef cuMemGetInfo
#undef cuMemcpyHtoDAsync
#undef cuMemcpyDtoHAsync
#undef cuMemcpyDtoDAsync
#undef cuMemsetD8Async
#undef cuEventCreate
#undef cuEventDestroy
#undef cuEventRecord
#undef cuEventSynchronize
#undef cuEventElapsedTime
#define FJ_CHECK_ABI(member, pfn) \
  static_assert(SameAbi<decltype(DriverApi::member), pfn>::value, #member " does not have the ABI of " #pfn);
FJ_CHECK_ABI(cuInit, PFN_cuInit_v2000)
FJ_CHECK_ABI(cuDriverGetVersion, PFN_cuDriverGetVersion_v2020)
FJ_CHECK_ABI(cuGetErrorName, PFN_cuGetErrorName_v6000)
FJ_CHECK_ABI(cuGetErrorString, PFN_cuGetErrorString_v6000)
FJ_CHECK_ABI(cuDeviceGetCount, PFN_cuDeviceGetCount_v2000)
FJ_CHECK_ABI(cuDeviceGet, PFN_cuDeviceGet_v2000)
FJ_CHECK_ABI(cuDeviceGetName, PFN_cuDeviceGetName_v2000)
FJ_CHECK_ABI(cuDeviceGetAttribute, PFN_cuDeviceGetAttribute_v2000)
FJ_CHECK_ABI(cuDeviceTotalMem, PFN_cuDeviceTotalMem_v3020)
FJ_CHECK_ABI(cuDevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000)
FJ_CHECK_ABI(cuDevicePrimaryCtxRelease, PFN_cuDevicePrimaryCtxRelease_v11000)
FJ_CHECK_ABI(cuCtxGetCurrent, PFN_cuCtxGetCurrent_v4000)
FJ_CHECK_ABI(cuCtxGetDevice, PFN_cuCtxGetDevice_v2000)
FJ_CHECK_ABI(cuCtxPushCurrent, PFN_cuCtxPushCurrent_v4000)
FJ_CHECK_ABI(cuCtxPopCurrent, PFN_cuCtxPopCurrent_v4000)
FJ_CHECK_ABI(cuCtxGetId, PFN_cuCtxGetId_v12000)
FJ_CHECK_ABI(cuStreamCreate, PFN_cuStreamCreate_v2000)
FJ_CHECK_ABI(cuStreamDestroy, PFN_cuStreamDestroy_v4000)
FJ_CHECK_ABI(cuStreamSynchronize, PFN_cuStreamSynchronize_v2000)
FJ_CHECK_ABI(cuStreamIsCapturing, PFN_cuStreamIsCapturing_v10000)
FJ_CHECK_ABI(cuModuleLoadDataEx, PFN_cuModuleLoadDataEx_v2010)
FJ_CHECK_ABI(cuModuleUnload, PFN_cuModuleUnload_v2000)
FJ_CHECK_ABI(cuModuleGetFunction, PFN_cuModuleGetFunction_v2000)
FJ_CHECK_ABI(cuFuncSetAttribute, PFN_cuFuncSetAttribute_v9000)
FJ_CHECK_ABI(cuFuncGetAttribute, PFN_cuFuncGetAttribute_v2020)
FJ_CHECK_ABI(cuOccupancyMaxPotentialBlockSize, PFN_cuOccupancyMaxPotentialBlockSize_v6050)
FJ_CHECK_ABI(cuOccupancyMaxActiveBlocksPerMultiprocessor, PFN_cuOccupancyMaxActiveBlocksPerMultiprocessor_v6050)
FJ_CHECK_ABI(cuLaunchKernel, PFN_cuLaunchKernel_v4000)
FJ_CHECK_ABI(cuMemAlloc, PFN_cuMemAlloc_v3020)
FJ_CHECK_ABI(cuMemFree, PFN_cuMemFree_v3020)
FJ_CHECK_ABI(cuMemAllocAsync, PFN_cuMemAllocAsync_v11020)
FJ_CHECK_ABI(cuMemFreeAsync, PFN_cuMemFreeAsync_v11020)
FJ_CHECK_ABI(cuMemGetInfo, PFN_cuMemGetInfo_v3020)
FJ_CHECK_ABI(cuMemcpyHtoDAsync, PFN_cuMemcpyHtoDAsync_v3020)
FJ_CHECK_ABI(cuMemcpyDtoHAsync, PFN_cuMemcpyDtoHAsync_v3020)
FJ_CHECK_ABI(cuMemcpyDtoDAsync, PFN_cuMemcpyDtoDAsync_v3020)
FJ_CHECK_ABI(cuMemsetD8Async, PFN_cuMemsetD8Async_v3020)
FJ_CHECK_ABI(cuEventCreate, PFN_cuEventCreate_v2000)
FJ_CHECK_ABI(cuEventDestroy, PFN_cuEventDestroy_v4000)
FJ_CHECK_ABI(cuEventRecord, PFN_cuEventRecord_v2000)
FJ_CHECK_ABI(cuEventSynchronize, PFN_cuEventSynchronize_v2000)
FJ_CHECK_ABI(cuEventElapsedTime, PFN_cuEventElapsedTime_v2000)
#undef FJ_CHECK_ABI
static_assert(kDriverAbiVersion == 12000, "the PFN versions above are those of CUDA 12.0");
}  // namespace fusejit::jit
