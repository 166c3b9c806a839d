// SPDX-License-Identifier: MIT
#pragma once
// A model of DeviceCachingAllocator (torch 2.5 to 2.11, native backend): small and large pools
// ordered by (stream, size, address), best fit with the two oversize rules, should_split taking
// the low end, merging on free, and the malloc slow path (release of oversize blocks, then of
// every cached segment, counted as a retry). Segments are cudaMalloc'd, or with expandable
// segments, pages (2 MiB small, 20 MiB large) mapped into a reserved range as needed and
// unmapped by empty_cache. Memory comes from a device (the device seam; replay's is the fake):
// each segment and each page is a reservation with physical memory mapped into it, so the
// device's memory bounds it (cudaMalloc or cuMemCreate failing) and a failure the device injects
// is an OOM here. A capacity (set_per_process_memory_fraction) is the allocator's own rule, as in
// torch. Part of the model layer: replay drives it over a recorded trace, and it follows the size
// rules of allocator_rules.hpp.

#include <rlmem/policy/allocator_policy.hpp>
#include <rlmem/model/allocator_settings.hpp>
#include <rlmem/model/detail/caching_allocator_parts.hpp>
#include <rlmem/device/device.hpp>

#include <cstdint>
#include <deque>
#include <map>
#include <memory_resource>
#include <optional>
#include <string>
#include <vector>

namespace rlmem {

/// Where a replay asks the device to place new memory: the recording's addresses, in order.
struct recorded_addresses {
  /// The recording's segment_alloc events (address and size, `alloc` unused) in trace order: a
  /// new cudaMalloc'd segment of the next one's size asks for its address, and takes it when the
  /// device has it free; any other goes where the device puts it.
  std::vector<model_segment_event> segments;
  /// The recording's segment_map addresses in order, so that new expandable reservations start
  /// where the recording's did.
  std::vector<std::uint64_t> maps;
};

/// PyTorch's native caching allocator over a device.
class caching_allocator_model final : public allocator_policy {
 public:
  /// `capacity_bytes` 0 means no limit. Pre: `gpu` outlives the model and is used by nothing
  /// else. Every size the model asks for is a multiple of 2 MiB, as the device's granularity
  /// should be; a trace-start segment off that grid (a crafted dump) takes whole granules.
  caching_allocator_model(device& gpu, const allocator_settings& settings, std::uint64_t capacity_bytes,
                          recorded_addresses recorded = {});
  caching_allocator_model(const caching_allocator_model&) = delete;
  caching_allocator_model& operator=(const caching_allocator_model&) = delete;
  /// Gives every segment and page back to the device.
  ~caching_allocator_model() override;

  /// A segment that existed before the trace, with its live blocks (address, size, in use and
  /// allocated flags); the gaps become free blocks. Returns the live blocks' model blocks. Its
  /// memory is taken from the device, asked for at `address` (page by page when expandable);
  /// where the device cannot hold it, fault() says so.
  std::vector<model_block*> add_existing_segment(std::uint64_t address, std::uint64_t size, std::uint64_t stream,
                                                 const std::vector<model_block>& live, bool small_pool, bool expandable) override;
  /// After the existing segments: joins the mapped runs of expandable segments into their
  /// reservations, with unmapped space between and after them.
  void close_existing_reservations() override;

  /// malloc(): nullptr when the request cannot be served (an OOM).
  model_block* allocate(std::uint64_t requested_bytes, std::uint64_t stream) override;
  /// free(): the user let go; allocated bytes drop.
  void free_requested(model_block* block) override;
  /// free_block(): the block is reusable and merges with free neighbours.
  void free_completed(model_block* block) override;
  /// torch.cuda.empty_cache(): every whole free segment goes back to the device.
  void empty_cache() override;

  std::int64_t allocated_bytes() const noexcept override { return allocated_bytes_; }
  std::int64_t reserved_bytes() const noexcept override { return reserved_bytes_; }
  std::uint64_t segments() const noexcept override;
  std::uint64_t alloc_retries() const noexcept override { return retries_; }
  const std::vector<model_segment_event>& segment_events() const noexcept override { return events_; }
  /// A device call failed for a reason other than memory, the device could not hold the
  /// trace-start memory, or two segments or pages fell at one address (a crafted dump). Empty
  /// while all is well.
  const std::string& fault() const noexcept override { return fault_; }
  /// Totals: allocated bytes within [0, reserved bytes]. Whole: also every block linked to the
  /// next of its segment where it ends, the allocated and the mapped blocks summing to the two
  /// counters, and the free pools and unmapped sets holding exactly the free mapped and the
  /// unmapped blocks. O(blocks log blocks).
  std::optional<std::string> broken_invariant(invariant_scope scope) const override;

 private:
  // The parts (rlmem/model/detail/caching_allocator_parts.hpp), by their names here.
  using pool = detail::free_pool;
  using unmapped_pool = detail::unmapped_pool;
  using device_memory = detail::device_memory;
  using reservation = detail::expandable_reservation;

  /// A reservation of `size` (asked for at `requested`) with physical memory mapped into it and
  /// access set: cudaMalloc, or one page of an expandable segment. `address` is where the model
  /// places it: `requested` when `at_requested` (the model's own layout: an expandable page, the
  /// trace-start memory), else where the device put it. False when the device refused; nothing
  /// changed then.
  bool take_memory(std::uint64_t size, std::uint64_t requested, bool at_requested, std::uint64_t& address);
  /// The memory take_memory placed at `address` back to the device (the caller fenced it).
  void give_back_memory(std::uint64_t address);
  /// Records a device failure other than running out of memory.
  void device_failed(const char* call, device_errc code);
  model_block* new_block(const model_block& value);
  void delete_block(model_block* block);
  void absorb(model_block* block, model_block* neighbour);
  void insert_free(model_block* block);
  bool garbage_collects() const;
  void garbage_collect();
  pool& pool_of(bool small) { return small ? small_free_ : large_free_; }
  unmapped_pool& unmapped_of(bool small) { return small ? small_unmapped_ : large_unmapped_; }
  std::uint64_t page_of(bool small) const;
  model_block* expandable_block(std::uint64_t size, std::uint64_t stream, bool small);
  model_block* find_expandable_block(std::uint64_t size, std::uint64_t stream, bool small);
  bool map_block(model_block* block, std::uint64_t size);
  void unmap_block(model_block* block);
  std::uint64_t reservation_end_for(std::uint64_t base) const;
  std::uint64_t page_origin(std::uint64_t address) const;
  bool cut_reservation_at(std::uint64_t address);
  std::uint64_t new_reservation_base();
  void merge_free_neighbours(model_block* block, pool& free);
  model_block* take_free_block(pool& free, std::uint64_t size, std::uint64_t stream);
  model_block* new_segment(std::uint64_t size, std::uint64_t alloc_size, std::uint64_t stream, bool small, bool retry);
  bool release_oversize_blocks(pool& free, std::uint64_t size, std::uint64_t stream);
  bool release_cached_segments();
  void release_segment(model_block* block);

  device& gpu_;
  std::uint64_t granularity_;
  allocator_settings settings_;
  std::uint64_t capacity_;
  std::uint64_t free_lookups_[2] = {0, 0};  // get_free_blocks_call_count of the large [0] and small [1] pool
  // What the device holds for the model: each cudaMalloc'd segment and each page of an
  // expandable segment, by the model's address. The device's address is the same unless that
  // range was taken (a crafted dump: a segment at address 0, or overlapping another). Invariant:
  // the device bytes sum to reserved_bytes_ when every trace-start segment is on the grid.
  std::map<std::uint64_t, device_memory> memory_;
  std::deque<model_block> storage_;
  std::vector<model_block*> recycled_;
  std::pmr::unsynchronized_pool_resource nodes_;
  pool small_free_{&nodes_};
  pool large_free_{&nodes_};
  unmapped_pool small_unmapped_{&nodes_};
  unmapped_pool large_unmapped_{&nodes_};
  // An expandable segment's reserved address range, by its start, so that a recorded map address
  // is checked in log time (a scan of every reservation per address was quadratic). The range is
  // the model's: its end is known only when the recording's next reservation is met (and may be
  // cut there), so the device reserves each page where it is mapped, not the range at once.
  std::map<std::uint64_t, reservation> reservations_;
  std::vector<model_block*> existing_runs_;  // first blocks of expandable runs, until closed
  recorded_addresses recorded_;
  std::uint64_t segments_placed_ = 0;  // recorded segments whose address a new segment took
  std::uint64_t maps_made_ = 0;
  std::uint64_t synthetic_base_ = std::uint64_t{1} << 57;  // reservations the recording did not make, above any real address
  std::int64_t allocated_bytes_ = 0;
  std::int64_t reserved_bytes_ = 0;
  std::uint64_t segments_ = 0;
  std::uint64_t retries_ = 0;
  std::vector<model_segment_event> events_;
  std::string fault_;
};

}  // namespace rlmem
