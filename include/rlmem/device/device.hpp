// SPDX-License-Identifier: MIT
#pragma once
// The device seam: every call an allocator policy makes to a GPU's virtual memory, as a few
// primitives with stated preconditions (mimalloc's prim.h). Two devices implement it: a fake one
// (tests, replay) and CUDA's virtual-memory driver API loaded at run time (the runtime). Nothing
// above this seam names the driver.

#include <rlmem/device/device_errors.hpp>

#include <cstdint>
#include <string_view>

namespace rlmem {

/// The primitives of the seam, as logs and counters name them.
enum class device_op : std::uint8_t {
  reserve, free_reservation, create, release, map, set_access, unmap, copy_to_host, copy_from_host,
  synchronize, host_allocate, host_free, copy_to_host_async, copy_from_host_async, fill, wait_copies, mark_copies, wait_mark,
  count_
};
/// "map" etc.; "unknown" outside the enum.
std::string_view device_op_name(device_op op) noexcept;

class device;
/// A physical allocation made by `create`; 0 is never a handle.
using physical_handle = std::uint64_t;

/// create + map + set_access of `bytes` at `address`, as one physical allocation: memory a
/// policy can hand out. On failure whatever was done is undone and the first error returned.
/// Pre: as map's (the range lies inside one reservation, none of it mapped).
device_errc map_new_memory(device& gpu, std::uint64_t address, std::uint64_t bytes, physical_handle& handle) noexcept;

/// Filled once when the device is opened.
struct device_config {
  int ordinal = 0;
  /// Every size and address given to reserve, create, map, set_access and unmap is a multiple of it.
  std::uint64_t granularity = 0;
  std::uint64_t total_bytes = 0;
};

/// A GPU's virtual memory. Not thread-safe: a policy serialises its calls (but wait_mark, where
/// concurrent_wait() says so). A call whose
/// preconditions do not hold returns invalid_argument and changes nothing (the fake checks every
/// one; the driver most).
class device {
 public:
  virtual ~device() = default;

  virtual const device_config& config() const noexcept = 0;

  /// Reserves `size` bytes of address space with no memory behind them; `address` is aligned to
  /// the granularity. A nonzero `requested` is a hint, as the driver takes one: the reservation
  /// starts there when that range is aligned, inside the device's address space and overlaps no
  /// reservation; otherwise it goes where it would have gone without one, so a caller that needs
  /// the address it asked for compares `address` with it. Pre: size > 0, a multiple of the
  /// granularity.
  virtual device_errc reserve(std::uint64_t size, std::uint64_t requested, std::uint64_t& address) noexcept = 0;
  /// Gives a reservation back. Pre: [address, address + size) is exactly one reservation and
  /// nothing in it is mapped.
  virtual device_errc free_reservation(std::uint64_t address, std::uint64_t size) noexcept = 0;

  /// Creates `size` bytes of physical memory, unmapped; its contents are unspecified. Pre: size >
  /// 0, a multiple of the granularity.
  virtual device_errc create(std::uint64_t size, physical_handle& handle) noexcept = 0;
  /// Gives a handle up; its memory returns to the device once its mapping is unmapped too. Pre:
  /// the handle was created and not yet released.
  virtual device_errc release(physical_handle handle) noexcept = 0;

  /// Maps a whole handle at `address`. Pre: size is the handle's size; the range lies inside one
  /// reservation and none of it is mapped. A handle may be mapped at several addresses at once,
  /// each seeing the same memory (the runtime's checking mode maps one poison page under every
  /// paused page); its memory returns once it is released and every mapping unmapped.
  virtual device_errc map(std::uint64_t address, std::uint64_t size, physical_handle handle) noexcept = 0;
  /// Gives this device read and write access: a new mapping has none. Pre: the range is covered
  /// by mappings.
  virtual device_errc set_access(std::uint64_t address, std::uint64_t size) noexcept = 0;
  /// Unmaps one mapping. Pre: the range is exactly one mapping (the driver cannot unmap part of
  /// one), and the caller has fenced every stream that may still use it.
  virtual device_errc unmap(std::uint64_t address, std::uint64_t size) noexcept = 0;

  /// Free and total memory of the device as the driver reports them.
  virtual device_errc memory_info(std::uint64_t& free_bytes, std::uint64_t& total_bytes) noexcept = 0;

  /// Synchronous copies between host memory and mapped device memory. Pre: the device range is
  /// covered by mappings with access set; size > 0.
  virtual device_errc copy_to_host(void* destination, std::uint64_t source, std::uint64_t size) noexcept = 0;
  virtual device_errc copy_from_host(std::uint64_t destination, const void* source, std::uint64_t size) noexcept = 0;

  /// Waits until every stream of the device is idle: the fence before unmapping memory a kernel
  /// may still use (the driver does not wait for them, nor do unmap and release).
  virtual device_errc synchronize() noexcept = 0;

  /// Page-locked host memory, which the copy engines read and write at full speed. Pre: size > 0.
  virtual device_errc host_allocate(std::uint64_t size, void*& host) noexcept = 0;
  /// Pre: `host` came from host_allocate and every copy using it has been waited for.
  virtual device_errc host_free(void* host) noexcept = 0;

  /// Copies and fills enqueued in order on the device's own copy stream, so that a caller can
  /// map or pin the next chunk while this one moves. They run after everything enqueued before
  /// them on this stream only: fence other streams first. Pre: as the synchronous copies; the
  /// host side stays valid until wait_copies(). A fake device does them at once.
  virtual device_errc copy_to_host_async(void* destination, std::uint64_t source, std::uint64_t size) noexcept = 0;
  virtual device_errc copy_from_host_async(std::uint64_t destination, const void* source, std::uint64_t size) noexcept = 0;
  /// Sets every byte of a mapped range with access set to `value`.
  virtual device_errc fill_async(std::uint64_t destination, std::uint64_t size, std::uint8_t value) noexcept = 0;
  /// Returns once every copy and fill enqueued so far is done; the first failure of any of them.
  virtual device_errc wait_copies() noexcept = 0;
  /// A mark after every copy and fill enqueued so far, to wait for those alone while later ones
  /// run (a pause unmaps a chunk once its backup is done, while the next chunk copies). Pre: every
  /// mark is waited for exactly once.
  virtual device_errc mark_copies(std::uint64_t& mark) noexcept = 0;
  virtual device_errc wait_mark(std::uint64_t mark) noexcept = 0;

  /// Whether wait_mark may run on one thread while other calls run on another: then a runtime
  /// waits for a backup's copies without holding its lock. CUDA's driver allows it; a device
  /// with bookkeeping of its own (the fake) does not.
  virtual bool concurrent_wait() const noexcept { return false; }

  /// Whether work enqueued on `stream` (a CUstream as an integer; 0 the legacy default stream)
  /// is being captured into a CUDA graph now: memory allocated for it then is what every replay
  /// of the graph reads and writes. A stream the device cannot ask about is not capturing.
  virtual bool stream_capturing(std::uint64_t stream) noexcept = 0;
};

}  // namespace rlmem
