// SPDX-License-Identifier: MIT
// The CUDA device: the seam's primitives over the driver's virtual-memory API, loaded with dlopen.
// Every driver call of the project is in this file (a hygiene test checks it).

#include <rlmem/device/cuda_device.hpp>

#include "cuda_driver_api.hpp"

#include <dlfcn.h>

#include <cstdint>
#include <string>
#include <utility>

namespace rlmem {

namespace {

namespace cu = cuda_driver;

device_errc errc_of(cu::result code) noexcept {
  switch (code) {
    case cu::success: return device_errc::ok;
    case cu::error_out_of_memory: return device_errc::out_of_memory;
    // The seam's preconditions, as the driver words them: a range already mapped, one not
    // mapped (or part of a mapping), a handle that is not one.
    case cu::error_invalid_value:
    case cu::error_already_mapped:
    case cu::error_not_mapped:
    case cu::error_invalid_handle: return device_errc::invalid_argument;
    case cu::error_not_initialized:
    case cu::error_no_device:
    case cu::error_invalid_device: return device_errc::unavailable;
    case cu::error_not_supported: return device_errc::not_supported;
    default: return device_errc::driver_error;
  }
}

// dlsym returns void*; the cast to a function pointer is what POSIX specifies for it.
template <typename Function>
bool load(void* library, const char* name, Function& function) {
  function = reinterpret_cast<Function>(dlsym(library, name));
  return function != nullptr;
}

class cuda_device final : public device {
 public:
  cuda_device(void* library, const cu::entry_points& driver, cu::device_ordinal ordinal_device, cu::context ctx, cu::stream copies,
              device_config config)
      : library_(library), driver_(driver), device_(ordinal_device), context_(ctx), copies_(copies), config_(config) {
    location_ = {cu::location_type_device, config.ordinal};
    properties_.type = cu::allocation_type_pinned;
    properties_.requested_handle_types = cu::handle_type_none;
    properties_.location = location_;
  }
  cuda_device(const cuda_device&) = delete;
  cuda_device& operator=(const cuda_device&) = delete;
  ~cuda_device() override {
    if (bind() == device_errc::ok) driver_.stream_destroy(copies_);
    driver_.primary_context_release(device_);
    dlclose(library_);
  }

  const device_config& config() const noexcept override { return config_; }

  device_errc reserve(std::uint64_t size, std::uint64_t requested, std::uint64_t& address) noexcept override {
    if (!sized(size)) return device_errc::invalid_argument;
    if (device_errc bound = bind(); bound != device_errc::ok) return bound;
    cu::device_pointer reserved = 0;
    // cuMemAddressReserve takes the requested address as a hint: where that range is taken it
    // reserves elsewhere, as the seam says. A misaligned one is no hint at all.
    cu::device_pointer hint = aligned(requested) ? requested : 0;
    device_errc result = errc_of(driver_.address_reserve(&reserved, size, config_.granularity, hint, 0));
    if (result == device_errc::ok) address = reserved;
    return result;
  }

  device_errc free_reservation(std::uint64_t address, std::uint64_t size) noexcept override {
    if (!aligned(address) || !sized(size)) return device_errc::invalid_argument;
    if (device_errc bound = bind(); bound != device_errc::ok) return bound;
    return errc_of(driver_.address_free(address, size));
  }

  device_errc create(std::uint64_t size, physical_handle& handle) noexcept override {
    if (!sized(size)) return device_errc::invalid_argument;
    if (device_errc bound = bind(); bound != device_errc::ok) return bound;
    cu::allocation_handle made = 0;
    device_errc result = errc_of(driver_.create(&made, size, &properties_, 0));
    if (result == device_errc::ok) handle = made;
    return result;
  }

  device_errc release(physical_handle handle) noexcept override {
    if (handle == 0) return device_errc::invalid_argument;
    if (device_errc bound = bind(); bound != device_errc::ok) return bound;
    return errc_of(driver_.release(handle));
  }

  device_errc map(std::uint64_t address, std::uint64_t size, physical_handle handle) noexcept override {
    if (!aligned(address) || !sized(size) || handle == 0) return device_errc::invalid_argument;
    if (device_errc bound = bind(); bound != device_errc::ok) return bound;
    return errc_of(driver_.map(address, size, 0, handle, 0));
  }

  device_errc set_access(std::uint64_t address, std::uint64_t size) noexcept override {
    if (!aligned(address) || !sized(size)) return device_errc::invalid_argument;
    if (device_errc bound = bind(); bound != device_errc::ok) return bound;
    cu::access_descriptor access{location_, cu::access_read_write};
    return errc_of(driver_.set_access(address, size, &access, 1));
  }

  device_errc unmap(std::uint64_t address, std::uint64_t size) noexcept override {
    if (!aligned(address) || !sized(size)) return device_errc::invalid_argument;
    if (device_errc bound = bind(); bound != device_errc::ok) return bound;
    return errc_of(driver_.unmap(address, size));
  }

  device_errc memory_info(std::uint64_t& free_bytes, std::uint64_t& total_bytes) noexcept override {
    if (device_errc bound = bind(); bound != device_errc::ok) return bound;
    std::size_t free_now = 0;
    std::size_t total = 0;
    device_errc result = errc_of(driver_.memory_info(&free_now, &total));
    if (result == device_errc::ok) {
      free_bytes = free_now;
      total_bytes = total;
    }
    return result;
  }

  device_errc copy_to_host(void* destination, std::uint64_t source, std::uint64_t size) noexcept override {
    if (destination == nullptr || size == 0) return device_errc::invalid_argument;
    if (device_errc bound = bind(); bound != device_errc::ok) return bound;
    return errc_of(driver_.copy_device_to_host(destination, source, size));
  }

  device_errc copy_from_host(std::uint64_t destination, const void* source, std::uint64_t size) noexcept override {
    if (source == nullptr || size == 0) return device_errc::invalid_argument;
    if (device_errc bound = bind(); bound != device_errc::ok) return bound;
    return errc_of(driver_.copy_host_to_device(destination, source, size));
  }

  device_errc synchronize() noexcept override {
    if (device_errc bound = bind(); bound != device_errc::ok) return bound;
    return errc_of(driver_.context_synchronize());
  }

  device_errc host_allocate(std::uint64_t size, void*& host) noexcept override {
    if (size == 0) return device_errc::invalid_argument;
    if (device_errc bound = bind(); bound != device_errc::ok) return bound;
    void* made = nullptr;
    device_errc result = errc_of(driver_.host_alloc(&made, size, 0));
    if (result == device_errc::ok) host = made;
    return result;
  }

  device_errc host_free(void* host) noexcept override {
    if (host == nullptr) return device_errc::invalid_argument;
    if (device_errc bound = bind(); bound != device_errc::ok) return bound;
    return errc_of(driver_.host_free(host));
  }

  device_errc copy_to_host_async(void* destination, std::uint64_t source, std::uint64_t size) noexcept override {
    if (destination == nullptr || size == 0) return device_errc::invalid_argument;
    if (device_errc bound = bind(); bound != device_errc::ok) return bound;
    return errc_of(driver_.copy_device_to_host_async(destination, source, size, copies_));
  }

  device_errc copy_from_host_async(std::uint64_t destination, const void* source, std::uint64_t size) noexcept override {
    if (source == nullptr || size == 0) return device_errc::invalid_argument;
    if (device_errc bound = bind(); bound != device_errc::ok) return bound;
    return errc_of(driver_.copy_host_to_device_async(destination, source, size, copies_));
  }

  device_errc fill_async(std::uint64_t destination, std::uint64_t size, std::uint8_t value) noexcept override {
    if (size == 0) return device_errc::invalid_argument;
    if (device_errc bound = bind(); bound != device_errc::ok) return bound;
    return errc_of(driver_.fill_async(destination, value, size, copies_));
  }

  device_errc wait_copies() noexcept override {
    if (device_errc bound = bind(); bound != device_errc::ok) return bound;
    return errc_of(driver_.stream_synchronize(copies_));
  }

  // A mark is an event recorded on the copy stream, destroyed once waited for.
  device_errc mark_copies(std::uint64_t& mark) noexcept override {
    if (device_errc bound = bind(); bound != device_errc::ok) return bound;
    cu::event made = nullptr;
    device_errc result = errc_of(driver_.event_create(&made, cu::event_disable_timing));
    if (result != device_errc::ok) return result;
    result = errc_of(driver_.event_record(made, copies_));
    if (result != device_errc::ok) {
      driver_.event_destroy(made);
      return result;
    }
    mark = reinterpret_cast<std::uintptr_t>(made);
    return device_errc::ok;
  }

  // wait_mark is an event wait and an event destroy: driver calls, safe from any thread.
  bool concurrent_wait() const noexcept override { return true; }

  bool stream_capturing(std::uint64_t stream) noexcept override {
    if (bind() != device_errc::ok) return false;
    int status = 0;
    auto* asked = reinterpret_cast<cu::stream>(static_cast<std::uintptr_t>(stream));
    return driver_.stream_is_capturing(asked, &status) == cu::success && status == cu::stream_capture_status_active;
  }

  device_errc wait_mark(std::uint64_t mark) noexcept override {
    if (mark == 0) return device_errc::invalid_argument;
    if (device_errc bound = bind(); bound != device_errc::ok) return bound;
    auto* waited = reinterpret_cast<cu::event>(static_cast<std::uintptr_t>(mark));
    device_errc result = errc_of(driver_.event_synchronize(waited));
    driver_.event_destroy(waited);
    return result;
  }

 private:
  bool aligned(std::uint64_t value) const noexcept { return value % config_.granularity == 0; }
  bool sized(std::uint64_t size) const noexcept { return size > 0 && aligned(size); }

  // The driver acts on the calling thread's current context: make it the device's primary one
  // (PyTorch's threads already have it; a thread of the caller's own may not).
  device_errc bind() const noexcept {
    cu::context current = nullptr;
    if (driver_.context_get_current(&current) == cu::success && current == context_) return device_errc::ok;
    return errc_of(driver_.context_set_current(context_));
  }

  void* library_;
  cu::entry_points driver_;
  cu::device_ordinal device_;
  cu::context context_;
  cu::stream copies_;  // the device's own stream for backups and restores
  device_config config_;
  cu::memory_location location_{};
  cu::allocation_properties properties_{};
};

// Why the device could not be opened: the code and the one line open_cuda_device reports.
using device_failure = basic_error<device_errc>;

// The step that failed and the driver's code, in one line.
std::string failed(const char* step, cu::result code) { return std::string(step) + " failed (CUresult " + std::to_string(code) + ")"; }

}  // namespace

result<std::unique_ptr<device>, device_errc> open_cuda_device(int ordinal) {
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return device_failure{device_errc::unavailable, 0, "no CUDA driver: libcuda.so.1 cannot be loaded"};
  auto give_up = [&](device_errc code, std::string reason) -> device_failure {
    dlclose(library);
    return {code, 0, std::move(reason)};
  };
  cu::entry_points driver{};
  bool complete = load(library, "cuInit", driver.init) && load(library, "cuDeviceGet", driver.device_get) &&
                  load(library, "cuDeviceTotalMem_v2", driver.device_total_mem) &&
                  load(library, "cuDevicePrimaryCtxRetain", driver.primary_context_retain) &&
                  load(library, "cuDevicePrimaryCtxRelease_v2", driver.primary_context_release) &&
                  load(library, "cuCtxGetCurrent", driver.context_get_current) &&
                  load(library, "cuCtxSetCurrent", driver.context_set_current) &&
                  load(library, "cuMemGetAllocationGranularity", driver.allocation_granularity) &&
                  load(library, "cuMemAddressReserve", driver.address_reserve) && load(library, "cuMemAddressFree", driver.address_free) &&
                  load(library, "cuMemCreate", driver.create) && load(library, "cuMemRelease", driver.release) &&
                  load(library, "cuMemMap", driver.map) && load(library, "cuMemUnmap", driver.unmap) &&
                  load(library, "cuMemSetAccess", driver.set_access) && load(library, "cuMemGetInfo_v2", driver.memory_info) &&
                  load(library, "cuMemcpyHtoD_v2", driver.copy_host_to_device) &&
                  load(library, "cuMemcpyDtoH_v2", driver.copy_device_to_host) &&
                  load(library, "cuCtxSynchronize", driver.context_synchronize) && load(library, "cuMemHostAlloc", driver.host_alloc) &&
                  load(library, "cuMemFreeHost", driver.host_free) && load(library, "cuStreamCreate", driver.stream_create) &&
                  load(library, "cuStreamDestroy_v2", driver.stream_destroy) &&
                  load(library, "cuStreamSynchronize", driver.stream_synchronize) &&
                  load(library, "cuMemcpyHtoDAsync_v2", driver.copy_host_to_device_async) &&
                  load(library, "cuMemcpyDtoHAsync_v2", driver.copy_device_to_host_async) &&
                  load(library, "cuMemsetD8Async", driver.fill_async) && load(library, "cuEventCreate", driver.event_create) &&
                  load(library, "cuEventRecord", driver.event_record) &&
                  load(library, "cuEventSynchronize", driver.event_synchronize) &&
                  load(library, "cuEventDestroy_v2", driver.event_destroy) &&
                  load(library, "cuStreamIsCapturing", driver.stream_is_capturing);
  if (!complete) return give_up(device_errc::not_supported, "the CUDA driver lacks the virtual-memory API (a driver older than CUDA 10.2)");
  if (cu::result code = driver.init(0); code != cu::success) {
    if (code == cu::error_no_device) return give_up(device_errc::unavailable, "no CUDA device");
    return give_up(device_errc::driver_error, failed("cuInit", code));
  }
  cu::device_ordinal handle = 0;
  if (cu::result code = driver.device_get(&handle, ordinal); code != cu::success) {
    return give_up(device_errc::unavailable, "no CUDA device " + std::to_string(ordinal) + " (" + failed("cuDeviceGet", code) + ")");
  }
  device_config config;
  config.ordinal = ordinal;
  std::size_t total = 0;
  if (cu::result code = driver.device_total_mem(&total, handle); code != cu::success) {
    return give_up(device_errc::driver_error, failed("cuDeviceTotalMem", code));
  }
  config.total_bytes = total;
  cu::allocation_properties properties{};
  properties.type = cu::allocation_type_pinned;
  properties.location = {cu::location_type_device, ordinal};
  std::size_t granularity = 0;
  if (cu::result code = driver.allocation_granularity(&granularity, &properties, cu::granularity_minimum); code != cu::success) {
    return give_up(device_errc::driver_error, failed("cuMemGetAllocationGranularity", code));
  }
  if (granularity == 0) return give_up(device_errc::driver_error, "the CUDA driver reports an allocation granularity of 0");
  config.granularity = granularity;
  cu::context ctx = nullptr;
  if (cu::result code = driver.primary_context_retain(&ctx, handle); code != cu::success) {
    return give_up(device_errc::driver_error, failed("cuDevicePrimaryCtxRetain", code));
  }
  // The copy stream belongs to the primary context: make it current while creating it.
  cu::context previous = nullptr;
  driver.context_get_current(&previous);
  cu::stream copies = nullptr;
  cu::result made = driver.context_set_current(ctx);
  if (made == cu::success) made = driver.stream_create(&copies, cu::stream_non_blocking);
  driver.context_set_current(previous);
  if (made != cu::success) {
    driver.primary_context_release(handle);
    return give_up(device_errc::driver_error, failed("cuStreamCreate", made));
  }
  return std::unique_ptr<device>(std::make_unique<cuda_device>(library, driver, handle, ctx, copies, config));
}

}  // namespace rlmem
