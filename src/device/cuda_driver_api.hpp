// SPDX-License-Identifier: MIT
#pragma once
// The part of CUDA's driver API the CUDA device calls, declared here so that every build compiles
// it without a CUDA toolkit; libcuda.so.1 is loaded at run time. Where cuda.h is present,
// tests/device/cuda_driver_layout_test.cpp checks every type and constant against it.

#include <cstddef>

namespace rlmem::cuda_driver {

using result = int;  // CUresult
using device_ordinal = int;  // CUdevice
using context = struct context_st*;  // CUcontext
using device_pointer = unsigned long long;  // CUdeviceptr (v2)
using allocation_handle = unsigned long long;  // CUmemGenericAllocationHandle
using stream = struct stream_st*;  // CUstream
using event = struct event_st*;    // CUevent

constexpr result success = 0;
constexpr result error_invalid_value = 1;
constexpr result error_out_of_memory = 2;
constexpr result error_not_initialized = 3;
constexpr result error_no_device = 100;
constexpr result error_invalid_device = 101;
constexpr result error_already_mapped = 208;
constexpr result error_not_mapped = 211;
constexpr result error_invalid_handle = 400;
constexpr result error_not_supported = 801;

constexpr int allocation_type_pinned = 1;   // CU_MEM_ALLOCATION_TYPE_PINNED
constexpr int handle_type_none = 0;         // CU_MEM_HANDLE_TYPE_NONE
constexpr int location_type_device = 1;     // CU_MEM_LOCATION_TYPE_DEVICE
constexpr int access_read_write = 3;        // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
constexpr int granularity_minimum = 0;      // CU_MEM_ALLOC_GRANULARITY_MINIMUM
constexpr unsigned int stream_non_blocking = 1;  // CU_STREAM_NON_BLOCKING
constexpr unsigned int event_disable_timing = 2;  // CU_EVENT_DISABLE_TIMING
constexpr int stream_capture_status_active = 1;   // CU_STREAM_CAPTURE_STATUS_ACTIVE

struct memory_location {  // CUmemLocation
  int type;
  int id;
};

struct allocation_properties {  // CUmemAllocationProp
  int type;
  int requested_handle_types;
  memory_location location;
  void* win32_handle_metadata;
  struct {
    unsigned char compression_type;
    unsigned char gpu_direct_rdma_capable;
    unsigned short usage;
    unsigned char reserved[4];
  } alloc_flags;
};

struct access_descriptor {  // CUmemAccessDesc
  memory_location location;
  int flags;
};

// The entry points, by the symbol names libcuda.so.1 exports (the _v2 ones where cuda.h maps the
// plain name to them).
struct entry_points {
  result (*init)(unsigned int flags);                                            // cuInit
  result (*device_get)(device_ordinal* device, int ordinal);                     // cuDeviceGet
  result (*device_total_mem)(std::size_t* bytes, device_ordinal device);          // cuDeviceTotalMem_v2
  result (*primary_context_retain)(context* ctx, device_ordinal device);          // cuDevicePrimaryCtxRetain
  result (*primary_context_release)(device_ordinal device);                       // cuDevicePrimaryCtxRelease_v2
  result (*context_get_current)(context* ctx);                                    // cuCtxGetCurrent
  result (*context_set_current)(context ctx);                                     // cuCtxSetCurrent
  result (*allocation_granularity)(std::size_t* granularity, const allocation_properties* properties, int option);
  result (*address_reserve)(device_pointer* address, std::size_t size, std::size_t alignment, device_pointer hint,
                            unsigned long long flags);                            // cuMemAddressReserve
  result (*address_free)(device_pointer address, std::size_t size);               // cuMemAddressFree
  result (*create)(allocation_handle* handle, std::size_t size, const allocation_properties* properties,
                   unsigned long long flags);                                     // cuMemCreate
  result (*release)(allocation_handle handle);                                    // cuMemRelease
  result (*map)(device_pointer address, std::size_t size, std::size_t offset, allocation_handle handle,
                unsigned long long flags);                                        // cuMemMap
  result (*unmap)(device_pointer address, std::size_t size);                      // cuMemUnmap
  result (*set_access)(device_pointer address, std::size_t size, const access_descriptor* descriptors,
                       std::size_t count);                                        // cuMemSetAccess
  result (*memory_info)(std::size_t* free_bytes, std::size_t* total_bytes);       // cuMemGetInfo_v2
  result (*copy_host_to_device)(device_pointer destination, const void* source, std::size_t size);  // cuMemcpyHtoD_v2
  result (*copy_device_to_host)(void* destination, device_pointer source, std::size_t size);        // cuMemcpyDtoH_v2
  result (*context_synchronize)();                                                // cuCtxSynchronize
  result (*host_alloc)(void** host, std::size_t size, unsigned int flags);         // cuMemHostAlloc
  result (*host_free)(void* host);                                                // cuMemFreeHost
  result (*stream_create)(stream* created, unsigned int flags);                    // cuStreamCreate
  result (*stream_destroy)(stream destroyed);                                     // cuStreamDestroy_v2
  result (*stream_synchronize)(stream waited);                                    // cuStreamSynchronize
  result (*copy_host_to_device_async)(device_pointer destination, const void* source, std::size_t size,
                                      stream on);                                 // cuMemcpyHtoDAsync_v2
  result (*copy_device_to_host_async)(void* destination, device_pointer source, std::size_t size,
                                      stream on);                                 // cuMemcpyDtoHAsync_v2
  result (*fill_async)(device_pointer destination, unsigned char value, std::size_t count, stream on);  // cuMemsetD8Async
  result (*event_create)(event* created, unsigned int flags);                     // cuEventCreate
  result (*event_record)(event recorded, stream on);                              // cuEventRecord
  result (*event_synchronize)(event waited);                                      // cuEventSynchronize
  result (*event_destroy)(event destroyed);                                       // cuEventDestroy_v2
  result (*stream_is_capturing)(stream asked, int* status);                       // cuStreamIsCapturing
};

}  // namespace rlmem::cuda_driver
