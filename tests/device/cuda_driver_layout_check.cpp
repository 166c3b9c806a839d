// SPDX-License-Identifier: MIT
// The driver API as src/device declares it, checked against cuda.h where a toolkit is installed:
// a translation unit of static_asserts, so a mismatch fails the build.

#include "device/cuda_driver_api.hpp"

#include <cuda.h>

#include <cstddef>
#include <type_traits>

namespace rlmem::cuda_driver {
namespace {

static_assert(sizeof(memory_location) == sizeof(CUmemLocation));
static_assert(offsetof(memory_location, id) == offsetof(CUmemLocation, id));
static_assert(sizeof(allocation_properties) == sizeof(CUmemAllocationProp));
static_assert(offsetof(allocation_properties, location) == offsetof(CUmemAllocationProp, location));
static_assert(offsetof(allocation_properties, win32_handle_metadata) == offsetof(CUmemAllocationProp, win32HandleMetaData));
static_assert(offsetof(allocation_properties, alloc_flags) == offsetof(CUmemAllocationProp, allocFlags));
static_assert(sizeof(access_descriptor) == sizeof(CUmemAccessDesc));
static_assert(offsetof(access_descriptor, flags) == offsetof(CUmemAccessDesc, flags));
static_assert(std::is_same_v<device_pointer, CUdeviceptr>);
static_assert(std::is_same_v<allocation_handle, CUmemGenericAllocationHandle>);
static_assert(sizeof(result) == sizeof(CUresult) && sizeof(device_ordinal) == sizeof(CUdevice));

static_assert(success == CUDA_SUCCESS && error_invalid_value == CUDA_ERROR_INVALID_VALUE);
static_assert(error_out_of_memory == CUDA_ERROR_OUT_OF_MEMORY && error_not_initialized == CUDA_ERROR_NOT_INITIALIZED);
static_assert(error_no_device == CUDA_ERROR_NO_DEVICE && error_invalid_device == CUDA_ERROR_INVALID_DEVICE);
static_assert(error_not_supported == CUDA_ERROR_NOT_SUPPORTED && error_already_mapped == CUDA_ERROR_ALREADY_MAPPED);
static_assert(error_not_mapped == CUDA_ERROR_NOT_MAPPED && error_invalid_handle == CUDA_ERROR_INVALID_HANDLE);
static_assert(allocation_type_pinned == CU_MEM_ALLOCATION_TYPE_PINNED && handle_type_none == CU_MEM_HANDLE_TYPE_NONE);
static_assert(location_type_device == CU_MEM_LOCATION_TYPE_DEVICE && access_read_write == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
static_assert(granularity_minimum == CU_MEM_ALLOC_GRANULARITY_MINIMUM);

// Each entry point's type against cuda.h's declaration of the symbol it is loaded from (the plain
// names are macros for the _v2 symbols), CUresult read as the int it is. dlopen cannot check a
// signature, so the compiler does. Entry points with enum or CUcontext parameters are left to
// the sizes asserted above.
template <typename Function>
struct with_int_result;
template <typename Result, typename... Parameters>
struct with_int_result<Result (*)(Parameters...)> {
  using type = result (*)(Parameters...);
};
template <typename Ours, typename Declared>
constexpr bool declared_as = std::is_same_v<Ours, typename with_int_result<Declared>::type>;

using points = entry_points;
static_assert(declared_as<decltype(points::init), decltype(&::cuInit)>);
static_assert(declared_as<decltype(points::device_get), decltype(&::cuDeviceGet)>);
static_assert(declared_as<decltype(points::device_total_mem), decltype(&::cuDeviceTotalMem)>);
static_assert(declared_as<decltype(points::primary_context_release), decltype(&::cuDevicePrimaryCtxRelease)>);
static_assert(declared_as<decltype(points::address_reserve), decltype(&::cuMemAddressReserve)>);
static_assert(declared_as<decltype(points::address_free), decltype(&::cuMemAddressFree)>);
static_assert(declared_as<decltype(points::release), decltype(&::cuMemRelease)>);
static_assert(declared_as<decltype(points::map), decltype(&::cuMemMap)>);
static_assert(declared_as<decltype(points::unmap), decltype(&::cuMemUnmap)>);
static_assert(declared_as<decltype(points::memory_info), decltype(&::cuMemGetInfo)>);
static_assert(declared_as<decltype(points::copy_host_to_device), decltype(&::cuMemcpyHtoD)>);
static_assert(declared_as<decltype(points::copy_device_to_host), decltype(&::cuMemcpyDtoH)>);
static_assert(declared_as<decltype(points::context_synchronize), decltype(&::cuCtxSynchronize)>);
static_assert(declared_as<decltype(points::host_alloc), decltype(&::cuMemHostAlloc)>);
static_assert(declared_as<decltype(points::host_free), decltype(&::cuMemFreeHost)>);
static_assert(sizeof(stream) == sizeof(CUstream) && stream_non_blocking == CU_STREAM_NON_BLOCKING);
static_assert(sizeof(event) == sizeof(CUevent) && event_disable_timing == CU_EVENT_DISABLE_TIMING);
static_assert(stream_capture_status_active == CU_STREAM_CAPTURE_STATUS_ACTIVE && sizeof(int) == sizeof(CUstreamCaptureStatus));

}  // namespace
}  // namespace rlmem::cuda_driver
