// SPDX-License-Identifier: MIT
#pragma once
// A device adaptor (RMM's statistics adaptor, for the seam): every call goes to the device it
// wraps, counted and timed per primitive, so that a runtime can say where its time goes (how
// many maps, unmaps and fences a step made, and the seconds spent in them).

#include <rlmem/device/device.hpp>

#include <array>
#include <cstdint>
#include <mutex>

namespace rlmem {

/// Per primitive of the seam: calls made and seconds spent in them, wall clock.
struct device_call_totals {
  /// One primitive's figures.
  struct totals_of_one {
    std::uint64_t calls = 0;  ///< calls made, failed ones included
    double seconds = 0;       ///< wall-clock seconds spent in them
  };
  /// Indexed by device_op.
  std::array<totals_of_one, static_cast<std::size_t>(device_op::count_)> by_op{};
  /// The figures of `op`. Pre: op < device_op::count_.
  const totals_of_one& operator[](device_op op) const noexcept { return by_op[static_cast<std::size_t>(op)]; }
};

/// A device that forwards every call to another, counting and timing it per primitive.
class timed_device final : public device {
 public:
  /// Pre: `inner` outlives the adaptor. As thread-safe as `inner`; the counters always are.
  explicit timed_device(device& inner) noexcept : inner_(inner) {}

  /// The figures so far, copied under the lock.
  device_call_totals totals() const;
  bool concurrent_wait() const noexcept override { return inner_.concurrent_wait(); }

  const device_config& config() const noexcept override { return inner_.config(); }
  device_errc reserve(std::uint64_t size, std::uint64_t requested, std::uint64_t& address) noexcept override;
  device_errc free_reservation(std::uint64_t address, std::uint64_t size) noexcept override;
  device_errc create(std::uint64_t size, physical_handle& handle) noexcept override;
  device_errc release(physical_handle handle) noexcept override;
  device_errc map(std::uint64_t address, std::uint64_t size, physical_handle handle) noexcept override;
  device_errc set_access(std::uint64_t address, std::uint64_t size) noexcept override;
  device_errc unmap(std::uint64_t address, std::uint64_t size) noexcept override;
  device_errc memory_info(std::uint64_t& free_bytes, std::uint64_t& total_bytes) noexcept override {
    return inner_.memory_info(free_bytes, total_bytes);
  }
  device_errc copy_to_host(void* destination, std::uint64_t source, std::uint64_t size) noexcept override;
  device_errc copy_from_host(std::uint64_t destination, const void* source, std::uint64_t size) noexcept override;
  device_errc synchronize() noexcept override;
  device_errc host_allocate(std::uint64_t size, void*& host) noexcept override;
  device_errc host_free(void* host) noexcept override;
  device_errc copy_to_host_async(void* destination, std::uint64_t source, std::uint64_t size) noexcept override;
  device_errc copy_from_host_async(std::uint64_t destination, const void* source, std::uint64_t size) noexcept override;
  device_errc fill_async(std::uint64_t destination, std::uint64_t size, std::uint8_t value) noexcept override;
  device_errc wait_copies() noexcept override;
  device_errc mark_copies(std::uint64_t& mark) noexcept override;
  device_errc wait_mark(std::uint64_t mark) noexcept override;
  bool stream_capturing(std::uint64_t stream) noexcept override { return inner_.stream_capturing(stream); }

 private:
  template <typename Call>
  device_errc timed(device_op op, Call call) noexcept;

  device& inner_;
  mutable std::mutex lock_;  // a wait_mark may be counted while another thread's call is
  device_call_totals totals_;
};

}  // namespace rlmem
