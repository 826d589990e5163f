// Compile-time check that the Driver API constants declared in driver.h match cuda.h. cuda.h is
// included for its declarations only (after driver.h, so its cuMemAlloc -> cuMemAlloc_v2 style
// macros cannot rename DriverApi's members); libcuda is never linked.
#include "jit/driver.h"

#include <cuda.h>

#include <type_traits>

namespace fusejit::jit::cu {
static_assert(CUDA_SUCCESS == kSuccess && CUDA_ERROR_INVALID_VALUE == kErrorInvalidValue);
static_assert(CUDA_ERROR_OUT_OF_MEMORY == kErrorOutOfMemory && CUDA_ERROR_NOT_INITIALIZED == kErrorNotInitialized);
static_assert(CUDA_ERROR_NO_DEVICE == kErrorNoDevice && CUDA_ERROR_INVALID_DEVICE == kErrorInvalidDevice);
static_assert(CUDA_ERROR_NO_BINARY_FOR_GPU == kErrorNoBinaryForGpu && CUDA_ERROR_INVALID_PTX == kErrorInvalidPtx);
static_assert(CUDA_ERROR_UNSUPPORTED_PTX_VERSION == kErrorUnsupportedPtxVersion);
static_assert(CUDA_ERROR_NOT_FOUND == kErrorNotFound);
static_assert(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK == kAttrMaxThreadsPerBlock);
static_assert(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT == kAttrMultiprocessorCount);
static_assert(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE == kAttrL2CacheSize);
static_assert(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR == kAttrMaxThreadsPerMultiprocessor);
static_assert(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR == kAttrComputeCapabilityMajor);
static_assert(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR == kAttrComputeCapabilityMinor);
static_assert(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR == kAttrMaxBlocksPerMultiprocessor);
static_assert(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN == kAttrMaxSharedMemoryPerBlockOptin);
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
