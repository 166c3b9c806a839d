// SPDX-License-Identifier: MIT
#pragma once
// A device in host memory: deterministic addresses (or the ones asked for), a capacity, every
// precondition checked, a failure injected at the Nth call, a log of every call, and optionally
// host-backed pages so that what a policy copies in and out can be checked on a CPU. Replay's
// simulated device: without host pages or log, it keeps one entry per live reservation,
// mapping and handle.

#include <rlmem/device/device.hpp>
#include <rlmem/device/detail/fake_device_parts.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace rlmem {

/// How a fake_device behaves: its size, its addresses, an injected failure, what it keeps.
struct fake_device_options {
  std::uint64_t total_bytes = std::uint64_t{80} << 30;  ///< physical memory handles can take, in bytes
  std::uint64_t granularity = std::uint64_t{2} << 20;   ///< the page: sizes and addresses are multiples of it
  /// Addresses are handed out upward from here, never reused, and past reservations made at a
  /// requested address: a run gives the same addresses every time. A requested address is
  /// honoured anywhere the range is aligned, does not wrap and overlaps no reservation (replay
  /// asks for the recording's addresses, which may lie anywhere).
  std::uint64_t address_base = std::uint64_t{0x7f00} << 32;
  /// Reservations without a requested address fail with out_of_memory past address_base + this.
  std::uint64_t address_space_bytes = std::uint64_t{1} << 46;
  /// The Nth primitive call (counting from 1, memory_info and config excepted) fails with
  /// out_of_memory and changes nothing; 0 for never.
  std::uint64_t fail_call = 0;
  /// Keep every handle's bytes in host memory so copies round-trip. Off for replay, whose memory
  /// must stay proportional to the trace, not to the simulated GPU.
  bool host_backed = false;
  /// Keep a log of every call (for tests of a policy's order of calls).
  bool keep_log = false;
};


/// One call as the fake saw it.
struct device_call {
  device_op op = device_op::reserve;    ///< the primitive called
  std::uint64_t address = 0;            ///< the device address it named; 0 for none (create, release)
  std::uint64_t size = 0;               ///< bytes it named; 0 for none (release)
  physical_handle handle = 0;           ///< the handle it named or made; 0 for none
  device_errc result = device_errc::ok; ///< what it returned
  /// Field by field, for tests that compare logs.
  bool operator==(const device_call&) const = default;
};

/// The device seam in host memory, strict about every precondition (see the file comment).
class fake_device final : public device {
 public:
  /// Bytes a new handle's pages hold when host-backed: not zero, so a policy that hands out
  /// memory it never wrote is caught.
  static constexpr std::byte fresh_page_byte{0xA5};

  /// Pre: granularity is a power of two; total_bytes and address_base are multiples of it.
  explicit fake_device(fake_device_options options = {});

  const device_config& config() const noexcept override { return config_; }
  device_errc reserve(std::uint64_t size, std::uint64_t requested, std::uint64_t& address) noexcept override;
  device_errc free_reservation(std::uint64_t address, std::uint64_t size) noexcept override;
  device_errc create(std::uint64_t size, physical_handle& handle) noexcept override;
  device_errc release(physical_handle handle) noexcept override;
  device_errc map(std::uint64_t address, std::uint64_t size, physical_handle handle) noexcept override;
  device_errc set_access(std::uint64_t address, std::uint64_t size) noexcept override;
  device_errc unmap(std::uint64_t address, std::uint64_t size) noexcept override;
  device_errc memory_info(std::uint64_t& free_bytes, std::uint64_t& total_bytes) noexcept override;
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
  /// Marks made and not yet waited for.
  std::size_t open_marks() const noexcept { return open_marks_.size(); }
  bool stream_capturing(std::uint64_t stream) noexcept override { return capturing_.count(stream) > 0; }
  /// A test's CUDA graph capture on `stream` begins (true) or ends.
  void set_capturing(std::uint64_t stream, bool capturing);

  /// Physical bytes held: handles not yet both released and unmapped.
  std::uint64_t used_bytes() const noexcept { return used_bytes_; }
  /// Another process took or gave back memory: from now on `free_bytes` more can be created
  /// (the total becomes used_bytes() + free_bytes, at most 2^64 - 1). What a recorded oom's
  /// device_free tells replay.
  void set_free_bytes(std::uint64_t free_bytes) noexcept;
  /// Bytes under mappings now (a handle mapped twice counts twice).
  std::uint64_t mapped_bytes() const noexcept { return mapped_bytes_; }
  /// Reservations not yet freed.
  std::size_t reservations() const noexcept { return reservations_.size(); }
  /// Handles not yet both released and unmapped everywhere.
  std::size_t live_handles() const noexcept { return handles_.size(); }
  /// Primitive calls so far, failed ones included (memory_info and config excepted): what
  /// fail_call counts.
  std::uint64_t calls() const noexcept { return calls_; }
  /// Calls of `op` that succeeded so far (what a driver would have been asked to do).
  std::uint64_t succeeded(device_op op) const noexcept { return succeeded_[static_cast<std::size_t>(op)]; }
  /// Host buffers from host_allocate not yet freed.
  std::size_t host_buffers() const noexcept { return host_buffers_.size(); }
  /// Bytes of those host buffers.
  std::uint64_t host_bytes() const noexcept { return host_bytes_; }
  /// synchronize() calls so far: a policy must fence before it unmaps.
  std::uint64_t fences() const noexcept { return fences_; }
  /// Every call in order, when keep_log is set (else empty).
  const std::vector<device_call>& log() const noexcept { return log_; }

 private:
  // The records (rlmem/device/detail/fake_device_parts.hpp), by their names here.
  using handle_state = detail::fake_handle_state;
  using mapping = detail::fake_mapping;
  using host_buffer = detail::fake_host_buffer;

  bool aligned(std::uint64_t value) const noexcept { return (value & (config_.granularity - 1)) == 0; }
  bool sized(std::uint64_t size) const noexcept { return size > 0 && aligned(size); }
  /// Counts the call and says whether it is the one to fail.
  bool injected_failure() noexcept;
  device_errc logged(device_op op, std::uint64_t address, std::uint64_t size, physical_handle handle, device_errc result) noexcept;
  /// Whether [address, address + size) does not wrap and overlaps no reservation.
  bool unreserved(std::uint64_t address, std::uint64_t size) const;
  /// The reservation holding all of [address, address + size), or end().
  std::map<std::uint64_t, std::uint64_t>::const_iterator reservation_holding(std::uint64_t address, std::uint64_t size) const;
  /// Calls `each(mapping start, mapping&)` over mappings covering [address, address + size) in
  /// order; false when a byte of the range is not mapped or `accessible_only` and one is not.
  template <typename Each>
  bool for_each_mapping(std::uint64_t address, std::uint64_t size, bool accessible_only, Each each);
  /// The copies' shared checks and the walk over the mappings; `move(host offset, handle bytes,
  /// length)` moves the bytes.
  template <typename Move>
  device_errc copy(device_op op, std::uint64_t address, std::uint64_t size, Move move) noexcept;
  device_errc to_host(device_op op, void* destination, std::uint64_t source, std::uint64_t size) noexcept;
  device_errc from_host(device_op op, std::uint64_t destination, const void* source, std::uint64_t size) noexcept;
  void drop_if_gone(std::unordered_map<physical_handle, handle_state>::iterator found) noexcept;

  fake_device_options options_;
  device_config config_;
  std::uint64_t next_address_ = 0;
  physical_handle next_handle_ = 1;
  std::uint64_t used_bytes_ = 0;
  std::uint64_t mapped_bytes_ = 0;
  std::set<std::uint64_t> capturing_;
  std::uint64_t calls_ = 0;
  std::array<std::uint64_t, static_cast<std::size_t>(device_op::count_)> succeeded_{};
  std::map<std::uint64_t, std::uint64_t> reservations_;  // start -> size
  std::map<std::uint64_t, mapping> mappings_;            // start -> mapping
  std::unordered_map<physical_handle, handle_state> handles_;
  std::vector<device_call> log_;
  std::unordered_map<void*, host_buffer> host_buffers_;
  std::uint64_t host_bytes_ = 0;
  std::uint64_t fences_ = 0;
  std::uint64_t next_mark_ = 1;
  std::vector<std::uint64_t> open_marks_;
};

}  // namespace rlmem
