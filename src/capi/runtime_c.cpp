// SPDX-License-Identifier: MIT
// librlmem's runtime entry points: the process's runtimes (one per device), PyTorch's pluggable
// allocator functions over them, and the C calls for tags, pause and resume, and statistics.

#include <rlmem/device/cuda_device.hpp>
#include <rlmem/device/fake_device.hpp>
#include <rlmem/rlmem_runtime.h>
#include <rlmem/runtime/runtime.hpp>
#include <rlmem/snapshot/snapshot.hpp>

#include "c_strings.hpp"
#include "caller_struct.hpp"
#include "torch_library_memory.hpp"
#include "torch_out_of_memory.hpp"

#include <nlohmann/json.hpp>

#include <pthread.h>  // pthread_rwlock_t: a writer-preferring lock

#include <array>
#include <cstddef>  // offsetof
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <shared_mutex>  // std::shared_lock
#include <string>
#include <string_view>
#include <vector>

namespace {

// A device and the runtime over it.
struct open_runtime {
  std::unique_ptr<rlmem::device> gpu;
  std::unique_ptr<rlmem::runtime> rt;
};

// A reader-writer lock under which no new reader starts while a writer waits. std::shared_mutex
// is glibc's reader-preferring rwlock: with threads allocating back to back its readers never
// all left at once, and a close waited more than 15 s (issue 28). No thread takes it twice, which
// under writer preference would wait behind the queued writer for ever.
class writer_preferring_lock {
 public:
  writer_preferring_lock() noexcept {
    pthread_rwlockattr_t attributes;
    pthread_rwlockattr_init(&attributes);
    pthread_rwlockattr_setkind_np(&attributes, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&lock_, &attributes);
    pthread_rwlockattr_destroy(&attributes);
  }
  ~writer_preferring_lock() { pthread_rwlock_destroy(&lock_); }
  writer_preferring_lock(const writer_preferring_lock&) = delete;
  writer_preferring_lock& operator=(const writer_preferring_lock&) = delete;

  void lock() noexcept { pthread_rwlock_wrlock(&lock_); }
  void unlock() noexcept { pthread_rwlock_unlock(&lock_); }
  void lock_shared() noexcept { pthread_rwlock_rdlock(&lock_); }
  void unlock_shared() noexcept { pthread_rwlock_unlock(&lock_); }

 private:
  pthread_rwlock_t lock_;
};

// One device's runtime, and the lock that keeps it alive while calls use it: calls (readers)
// share it, opening and closing take it alone. A lock per device, so that opening or closing one
// device never waits for calls on another.
struct device_slot {
  writer_preferring_lock lock;
  std::unique_ptr<open_runtime> open;
};

// Ordinals 0..63: more GPUs than any host has.
constexpr int max_devices = 64;
std::array<device_slot, max_devices> registry;
// rlmem_runtime_configure's options, for runtimes opened by first use; struct_size 0: none.
std::mutex configured_lock;
rlmem_runtime_options configured{};

device_slot& slot_of(int ordinal) noexcept { return registry[static_cast<std::size_t>(ordinal)]; }

using rlmem::capi::layout_ending_at;

// The layouts rlmem_runtime_options has had, oldest first (rlmem.h: what struct_size accepts):
// bb1b2a6 ended at copy_chunk_bytes, af28be5 added keep_host_buffers, df6d280 history_entries.
constexpr rlmem::capi::struct_layouts<3> runtime_options_layouts{
    "rlmem_runtime_options", "call rlmem_runtime_options_init() first",
    {layout_ending_at<rlmem_runtime_options>(offsetof(rlmem_runtime_options, copy_chunk_bytes) + sizeof(uint64_t)),
     layout_ending_at<rlmem_runtime_options>(offsetof(rlmem_runtime_options, keep_host_buffers) + sizeof(int)),
     sizeof(rlmem_runtime_options)}};
static_assert(runtime_options_layouts.sizes.back() ==
                  layout_ending_at<rlmem_runtime_options>(offsetof(rlmem_runtime_options, history_entries) + sizeof(uint64_t)),
              "rlmem_runtime_options grew: append its new layout, and keep rlmem_runtime_options_init() at the 0.2 release's");
// What the plain rlmem_runtime_options_init() writes: callers built against the 0.2 release's header
// (before the sized init) and ctypes declarations of that layout call it.
constexpr std::size_t runtime_options_size_of_release_0_2 = runtime_options_layouts.sizes[2];

rlmem_runtime_options runtime_options_defaults() noexcept {
  rlmem_runtime_options options{};
  options.struct_size = sizeof(rlmem_runtime_options);
  return options;
}

// The caller's options as this library's struct (fields past their struct_size at their
// defaults); false with the reason when struct_size is no layout or a field is out of bounds.
bool read_options(const rlmem_runtime_options* caller, rlmem_runtime_options& read, std::string& why) {
  if (!rlmem::capi::known_layout(runtime_options_layouts, rlmem::capi::caller_struct_size(caller), why)) return false;
  read = rlmem::capi::read_caller_struct(caller, runtime_options_defaults());
  if (read.history_entries > rlmem::runtime_options::max_history_entries) {
    why = "history_entries " + std::to_string(read.history_entries) + " is more than the " +
          std::to_string(rlmem::runtime_options::max_history_entries) + " events the runtime keeps";
    return false;
  }
  return true;
}

using rlmem::capi::copy_out;

int report(char** error_out, int status, const std::string& message) noexcept {
  if (error_out != nullptr) *error_out = copy_out(message);
  return status;
}

int status_of(rlmem::runtime_errc code) noexcept {
  switch (code) {
    case rlmem::runtime_errc::ok: return RLMEM_OK;
    case rlmem::runtime_errc::out_of_memory: return RLMEM_E_NO_MEMORY;
    case rlmem::runtime_errc::paused:
    case rlmem::runtime_errc::not_paused:
    case rlmem::runtime_errc::already_paused:
    case rlmem::runtime_errc::unknown_tag: return RLMEM_E_STATE;
    case rlmem::runtime_errc::unknown_pointer:
    case rlmem::runtime_errc::invalid_argument: return RLMEM_E_INVALID_ARGUMENT;
    case rlmem::runtime_errc::device_error:
    case rlmem::runtime_errc::count_: break;
  }
  return RLMEM_E_DEVICE;
}

// What a call made of the runtime returns when it has no value of its own to pass on.
using runtime_outcome = rlmem::result<void, rlmem::runtime_errc>;

// A runtime call that makes an address: the address into `out` on success (untouched on failure),
// and the outcome for with_runtime.
runtime_outcome delivered(rlmem::result<std::uint64_t, rlmem::runtime_errc> made, std::uint64_t& out) {
  if (!made.ok()) return made.failure();
  out = made.value();
  return {};
}

bool valid_ordinal(int ordinal) noexcept { return ordinal >= 0 && ordinal < max_devices; }

// Growable buffers of 2^63 bytes or more are refused here: no device has that much address
// space, and the policy rounds sizes up to its page, which wraps past 2^64 for sizes within a
// page of it (a reservation of 0 bytes faulted). A grow past the buffer's max_bytes is refused
// by the runtime.
constexpr std::uint64_t growable_size_limit = std::uint64_t{1} << 63;

// Reads the caller's options; false with the reason when they are not this library's.
bool convert(const rlmem_runtime_options* caller, std::uint64_t device_bytes, rlmem::runtime_options& options, std::string& why) {
  options.policy.reservation_bytes = device_bytes;
  // The checking mode is for a debugging run, switched on where the program is started.
  const char* checking = std::getenv("RLMEM_CHECK_PAUSED");
  options.check_contents = checking != nullptr && std::string_view(checking) == "1";
  if (caller == nullptr) return true;
  rlmem_runtime_options read;
  if (!read_options(caller, read, why)) return false;
  const rlmem_runtime_options* given = &read;
  options.policy.capacity_bytes = given->capacity_bytes;
  options.policy.release_free_pages = given->release_free_pages != 0;
  if (given->reservation_bytes != 0) options.policy.reservation_bytes = given->reservation_bytes;
  if (given->copy_chunk_bytes != 0) options.copy_chunk_bytes = given->copy_chunk_bytes;
  options.keep_host_buffers = given->keep_host_buffers != 0;
  options.history_entries = given->history_entries;
  return true;
}

int install(int ordinal, std::unique_ptr<rlmem::device> gpu, const rlmem_runtime_options* options, char** error_out) {
  rlmem::runtime_options converted;
  std::string why;
  if (!convert(options, gpu->config().total_bytes, converted, why)) return report(error_out, RLMEM_E_INVALID_ARGUMENT, why);
  auto made = std::make_unique<open_runtime>();
  made->rt = std::make_unique<rlmem::runtime>(*gpu, converted);
  made->gpu = std::move(gpu);
  device_slot& slot = slot_of(ordinal);
  std::unique_lock hold(slot.lock);
  if (slot.open) return report(error_out, RLMEM_E_STATE, "the runtime of device " + std::to_string(ordinal) + " is open already");
  slot.open = std::move(made);
  return RLMEM_OK;
}

// Runs `call(runtime&)`, which returns the runtime's result, on the open runtime of `ordinal`
// under the shared lock, turning every failure into a status and its message: the failure's
// detail, the call's own reason even while other threads fail too. Every failing runtime call
// carries one; `call` itself reports a failure of its own (out of host memory) by throwing.
template <typename Call>
int with_runtime(int ordinal, char** error_out, Call call) noexcept {
  if (error_out != nullptr) *error_out = nullptr;
  if (!valid_ordinal(ordinal)) return report(error_out, RLMEM_E_INVALID_ARGUMENT, "device " + std::to_string(ordinal) + " is out of range");
  try {
    device_slot& slot = slot_of(ordinal);
    std::shared_lock hold(slot.lock);
    open_runtime* open = slot.open.get();
    if (open == nullptr) return report(error_out, RLMEM_E_STATE, "the runtime of device " + std::to_string(ordinal) + " is not open");
    auto outcome = call(*open->rt);
    if (outcome.ok()) return RLMEM_OK;
    return report(error_out, status_of(outcome.code()), outcome.failure().detail);
  } catch (const std::bad_alloc&) {
    return report(error_out, RLMEM_E_NO_MEMORY, "out of host memory");
  } catch (const std::exception& error) {
    return report(error_out, RLMEM_E_INTERNAL, error.what());
  } catch (...) {
    return report(error_out, RLMEM_E_INTERNAL, "an unknown exception");
  }
}

// The runtime's history as torch's snapshot records it: each event is one of its trace actions.
rlmem::trace_action trace_action_of(rlmem::history_event::kind kind) {
  using event = rlmem::history_event::kind;
  switch (kind) {
    case event::alloc: return rlmem::trace_action::alloc;
    case event::free_requested: return rlmem::trace_action::free_requested;
    case event::free_completed: return rlmem::trace_action::free_completed;
    case event::segment_map: return rlmem::trace_action::segment_map;
    case event::segment_unmap: return rlmem::trace_action::segment_unmap;
    case event::oom: return rlmem::trace_action::oom;
  }
  return rlmem::trace_action::unknown;
}

nlohmann::json counter_json(const rlmem::counter& value) {
  return {{"current", value.current}, {"peak", value.peak}, {"total", value.total}};
}

// {"map": {"calls", "seconds"}, ...}: the primitives the runtime called at least once.
nlohmann::json device_calls_json(const rlmem::device_call_totals& totals) {
  nlohmann::json calls = nlohmann::json::object();
  for (std::size_t op = 0; op < totals.by_op.size(); ++op) {
    if (totals.by_op[op].calls == 0) continue;
    calls[std::string(rlmem::device_op_name(static_cast<rlmem::device_op>(op)))] = {{"calls", totals.by_op[op].calls},
                                                                                    {"seconds", totals.by_op[op].seconds}};
  }
  return calls;
}

// Why a torch request of a workspace's size could not be told apart from a library's, and the way
// out, as pause's refusal quotes it.
constexpr std::string_view unproven_request_reason =
    "the size of a cuBLAS workspace, and the stack of the code that asked could not be read; "
    "free it, or call rlmem.runtime.prepare_libraries() (rlmem_torch_prepare_libraries) before the region";

// The allocation behind both torch entry points: the address, or nullptr with the reason.
void* torch_allocate(std::size_t size, int device, void* stream, std::string& why) noexcept {
  if (size == 0) return nullptr;
  if (!valid_ordinal(device)) {
    why = "device " + std::to_string(device) + " is out of range";
    return nullptr;
  }
  char* error = nullptr;
  if (rlmem_runtime_is_open(device) == 0) {
    // First use of this device: its runtime opens with the configured options.
    int status = rlmem_runtime_open_cuda(device, nullptr, &error);
    if (status != RLMEM_OK && status != RLMEM_E_STATE) {
      why = error != nullptr ? error : "the runtime cannot be opened";
      std::free(error);
      return nullptr;
    }
    std::free(error);
    error = nullptr;
  }
  std::uint64_t address = 0;
  std::uint64_t on_stream = reinterpret_cast<std::uintptr_t>(stream);
  int status = RLMEM_OK;
  switch (rlmem::capi::classify_torch_request(device, size, on_stream)) {
    case rlmem::capi::torch_request::tensor:
      status = rlmem_runtime_allocate(device, size, on_stream, &address, &error);
      break;
    case rlmem::capi::torch_request::library:
      status = with_runtime(device, &error, [&](rlmem::runtime& rt) {
        return delivered(rt.allocate_for_library(size, on_stream), address);
      });
      break;
    case rlmem::capi::torch_request::unproven:
      status = with_runtime(device, &error, [&](rlmem::runtime& rt) {
        return delivered(rt.allocate_unproven(size, on_stream, unproven_request_reason), address);
      });
      break;
  }
  if (status == RLMEM_OK) return reinterpret_cast<void*>(address);
  why = error != nullptr ? error : "allocation failed";
  std::free(error);
  return nullptr;
}

}  // namespace

extern "C" {

int rlmem_runtime_options_init_sized(rlmem_runtime_options* options, size_t struct_size) {
  return rlmem::capi::init_caller_struct(options, struct_size, runtime_options_layouts, runtime_options_defaults());
}

void(rlmem_runtime_options_init)(rlmem_runtime_options* options) {
  rlmem_runtime_options_init_sized(options, runtime_options_size_of_release_0_2);
}

int rlmem_runtime_configure(const rlmem_runtime_options* options, char** error_out) {
  if (error_out != nullptr) *error_out = nullptr;
  try {
    // Kept as this library's whole struct: runtimes opened later read it as such.
    rlmem_runtime_options whole{};
    std::string why;
    if (options != nullptr && !read_options(options, whole, why)) return report(error_out, RLMEM_E_INVALID_ARGUMENT, why);
    std::lock_guard hold(configured_lock);
    configured = whole;
    return RLMEM_OK;
  } catch (...) {
    return report(error_out, RLMEM_E_NO_MEMORY, "out of host memory");
  }
}

int rlmem_runtime_open_cuda(int ordinal, const rlmem_runtime_options* options, char** error_out) {
  if (error_out != nullptr) *error_out = nullptr;
  if (!valid_ordinal(ordinal)) return report(error_out, RLMEM_E_INVALID_ARGUMENT, "device " + std::to_string(ordinal) + " is out of range");
  try {
    auto opened = rlmem::open_cuda_device(ordinal);
    if (!opened.ok()) return report(error_out, RLMEM_E_DEVICE, opened.failure().detail);
    rlmem_runtime_options given{};
    if (options == nullptr) {
      std::lock_guard hold(configured_lock);
      given = configured;
    }
    return install(ordinal, std::move(opened).value(), options != nullptr ? options : (given.struct_size != 0 ? &given : nullptr),
                   error_out);
  } catch (const std::bad_alloc&) {
    return report(error_out, RLMEM_E_NO_MEMORY, "out of host memory");
  } catch (...) {
    return report(error_out, RLMEM_E_INTERNAL, "an exception opening the runtime");
  }
}

int rlmem_runtime_open_fake(int ordinal, uint64_t total_bytes, uint64_t granularity, const rlmem_runtime_options* options,
                            char** error_out) {
  if (error_out != nullptr) *error_out = nullptr;
  if (!valid_ordinal(ordinal)) return report(error_out, RLMEM_E_INVALID_ARGUMENT, "device " + std::to_string(ordinal) + " is out of range");
  if (granularity == 0 || (granularity & (granularity - 1)) != 0 || total_bytes < granularity || total_bytes % granularity != 0) {
    return report(error_out, RLMEM_E_INVALID_ARGUMENT, "the fake device needs a power-of-two granularity dividing its total bytes");
  }
  try {
    rlmem::fake_device_options fake;
    fake.total_bytes = total_bytes;
    fake.granularity = granularity;
    fake.host_backed = true;
    return install(ordinal, std::make_unique<rlmem::fake_device>(fake), options, error_out);
  } catch (const std::bad_alloc&) {
    return report(error_out, RLMEM_E_NO_MEMORY, "out of host memory");
  } catch (...) {
    return report(error_out, RLMEM_E_INTERNAL, "an exception opening the runtime");
  }
}

int rlmem_runtime_close(int ordinal) {
  if (!valid_ordinal(ordinal)) return RLMEM_E_INVALID_ARGUMENT;
  std::unique_ptr<open_runtime> closing;
  {
    device_slot& slot = slot_of(ordinal);
    std::unique_lock hold(slot.lock);
    closing = std::move(slot.open);
  }
  if (!closing) return RLMEM_E_STATE;
  closing->rt.reset();  // its memory back to the device before the device closes
  return RLMEM_OK;
}

int rlmem_runtime_is_open(int ordinal) {
  if (!valid_ordinal(ordinal)) return 0;
  device_slot& slot = slot_of(ordinal);
  std::shared_lock hold(slot.lock);
  return slot.open != nullptr ? 1 : 0;
}

int rlmem_runtime_allocate(int ordinal, uint64_t size, uint64_t stream, uint64_t* address, char** error_out) {
  if (address == nullptr) return report(error_out, RLMEM_E_INVALID_ARGUMENT, "address is NULL");
  return with_runtime(ordinal, error_out, [&](rlmem::runtime& rt) { return delivered(rt.allocate(size, stream), *address); });
}

int rlmem_runtime_free(int ordinal, uint64_t address, char** error_out) {
  return with_runtime(ordinal, error_out, [&](rlmem::runtime& rt) { return rt.free(address); });
}

int rlmem_runtime_enter_region(int ordinal, const char* tag, char** error_out) {
  if (tag == nullptr || *tag == '\0') return report(error_out, RLMEM_E_INVALID_ARGUMENT, "a region needs a tag name");
  return with_runtime(ordinal, error_out, [&](rlmem::runtime& rt) { return rt.enter_region(tag); });
}

int rlmem_runtime_leave_region(int ordinal, char** error_out) {
  return with_runtime(ordinal, error_out, [&](rlmem::runtime& rt) { return rt.leave_region(); });
}

int rlmem_runtime_pause(int ordinal, const char* tag, int keep_host, char** error_out) {
  if (tag == nullptr) return report(error_out, RLMEM_E_INVALID_ARGUMENT, "tag is NULL");
  return with_runtime(ordinal, error_out, [&](rlmem::runtime& rt) {
    return rt.pause(tag, keep_host != 0 ? rlmem::keep_contents::host : rlmem::keep_contents::discard);
  });
}

int rlmem_runtime_resume(int ordinal, const char* tag, char** error_out) {
  if (tag == nullptr) return report(error_out, RLMEM_E_INVALID_ARGUMENT, "tag is NULL");
  return with_runtime(ordinal, error_out, [&](rlmem::runtime& rt) { return rt.resume(tag); });
}

int rlmem_runtime_release_graph_memory(int ordinal, const char* tag, char** error_out) {
  return with_runtime(ordinal, error_out, [&](rlmem::runtime& rt) { return rt.release_graph_memory(tag != nullptr ? tag : ""); });
}

int rlmem_runtime_blocks_still_filled_json(int ordinal, const char* tag, char** json_out, char** error_out) {
  if (json_out == nullptr) return report(error_out, RLMEM_E_INVALID_ARGUMENT, "json_out is NULL");
  *json_out = nullptr;
  if (tag == nullptr) return report(error_out, RLMEM_E_INVALID_ARGUMENT, "tag is NULL");
  return with_runtime(ordinal, error_out, [&](rlmem::runtime& rt) -> runtime_outcome {
    auto blocks = rt.blocks_still_filled(tag);
    if (!blocks.ok()) return blocks.failure();
    nlohmann::json listed = nlohmann::json::array();
    for (const rlmem::address_run& block : blocks.value()) listed.push_back({{"address", block.address}, {"size", block.bytes}});
    *json_out = copy_out(listed.dump());
    if (*json_out == nullptr) throw std::bad_alloc();
    return {};
  });
}

int rlmem_runtime_empty_cache(int ordinal, char** error_out) {
  return with_runtime(ordinal, error_out, [&](rlmem::runtime& rt) { return rt.empty_cache(); });
}

int rlmem_runtime_release_host_buffers(int ordinal, char** error_out) {
  return with_runtime(ordinal, error_out, [&](rlmem::runtime& rt) {
    rt.release_host_buffers();
    return runtime_outcome{};
  });
}

int rlmem_runtime_reserve_host_buffers(int ordinal, uint64_t bytes, char** error_out) {
  return with_runtime(ordinal, error_out, [&](rlmem::runtime& rt) { return rt.reserve_host_buffers(bytes); });
}

int rlmem_runtime_reset_peaks(int ordinal, char** error_out) {
  return with_runtime(ordinal, error_out, [&](rlmem::runtime& rt) {
    rt.reset_peaks();
    return runtime_outcome{};
  });
}

int rlmem_runtime_growable_reserve(int ordinal, uint64_t max_bytes, uint64_t* address, char** error_out) {
  if (address == nullptr) return report(error_out, RLMEM_E_INVALID_ARGUMENT, "address is NULL");
  if (max_bytes >= growable_size_limit) {
    return report(error_out, RLMEM_E_INVALID_ARGUMENT, "a growable buffer of " + std::to_string(max_bytes) + " bytes: 2^63 or more");
  }
  return with_runtime(ordinal, error_out, [&](rlmem::runtime& rt) { return delivered(rt.reserve_growable(max_bytes), *address); });
}

int rlmem_runtime_grow(int ordinal, uint64_t address, uint64_t bytes, uint64_t* grown, char** error_out) {
  return with_runtime(ordinal, error_out, [&](rlmem::runtime& rt) {
    runtime_outcome grew = rt.grow(address, bytes);
    if (grown != nullptr && grew.code() != rlmem::runtime_errc::invalid_argument) *grown = rt.grown_bytes(address);
    return grew;
  });
}

int rlmem_runtime_growable_release(int ordinal, uint64_t address, char** error_out) {
  return with_runtime(ordinal, error_out, [&](rlmem::runtime& rt) { return rt.release_growable(address); });
}

int rlmem_runtime_read(int ordinal, uint64_t address, void* destination, uint64_t size, char** error_out) {
  if (destination == nullptr || size == 0) return report(error_out, RLMEM_E_INVALID_ARGUMENT, "nothing to read into");
  return with_runtime(ordinal, error_out, [&](rlmem::runtime& rt) { return rt.read(address, destination, size); });
}

int rlmem_runtime_write(int ordinal, uint64_t address, const void* source, uint64_t size, char** error_out) {
  if (source == nullptr || size == 0) return report(error_out, RLMEM_E_INVALID_ARGUMENT, "nothing to write");
  return with_runtime(ordinal, error_out, [&](rlmem::runtime& rt) { return rt.write(address, source, size); });
}

int rlmem_runtime_statistics_json(int ordinal, char** json_out, char** error_out) {
  if (json_out == nullptr) return report(error_out, RLMEM_E_INVALID_ARGUMENT, "json_out is NULL");
  *json_out = nullptr;
  return with_runtime(ordinal, error_out, [&](rlmem::runtime& rt) {
    nlohmann::json tags = nlohmann::json::array();
    for (const rlmem::tag_statistics& tag : rt.statistics()) {
      tags.push_back({{"name", tag.name},
                      {"paused", tag.paused},
                      {"allocated_bytes", counter_json(tag.allocated_bytes)},
                      {"allocations", counter_json(tag.allocations)},
                      {"mapped_bytes", counter_json(tag.mapped_bytes)},
                      {"paused_bytes", tag.paused_bytes},
                      {"host_backup_bytes", tag.host_backup_bytes},
                      {"pauses", tag.pauses},
                      {"resumes", tag.resumes},
                      {"failed_allocations", tag.failed_allocations},
                      {"writes_while_paused", tag.writes_while_paused},
                      {"graph_held_bytes", tag.graph_held_bytes},
                      {"last_pause", {{"copied_bytes", tag.last_pause_copied_bytes}, {"seconds", tag.last_pause_seconds}}},
                      {"last_resume", {{"copied_bytes", tag.last_resume_copied_bytes}, {"seconds", tag.last_resume_seconds}}}});
    }
    rlmem::runtime_totals totals = rt.totals();
    nlohmann::json document = {{"tags", std::move(tags)},
                               {"totals",
                                {{"allocated_bytes", counter_json(totals.allocated_bytes)},
                                 {"allocations", counter_json(totals.allocations)},
                                 {"reserved_bytes", counter_json(totals.reserved_bytes)},
                                 {"alloc_retries", totals.alloc_retries},
                                 {"ooms", totals.ooms},
                                 {"host_buffer_bytes", totals.host_buffer_bytes},
                                 {"device_calls", device_calls_json(totals.device_calls)},
                                 {"library_check_unwinds", rlmem::capi::library_check_unwinds()}}}};
    // Tag names are the caller's bytes: replace what is not UTF-8 rather than fail.
    *json_out = copy_out(document.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    if (*json_out == nullptr) throw std::bad_alloc();
    return runtime_outcome{};
  });
}

int rlmem_runtime_snapshot_json(int ordinal, char** json_out, char** error_out) {
  if (json_out == nullptr) return report(error_out, RLMEM_E_INVALID_ARGUMENT, "json_out is NULL");
  *json_out = nullptr;
  return with_runtime(ordinal, error_out, [&](rlmem::runtime& rt) {
    rlmem::runtime_snapshot taken = rt.snapshot();
    nlohmann::json segments = nlohmann::json::array();
    for (const rlmem::runtime_snapshot::segment& each : taken.segments) {
      nlohmann::json blocks = nlohmann::json::array();
      std::uint64_t at = each.address;
      std::uint64_t allocated = 0;
      std::uint64_t requested = 0;
      auto gap = [&](std::uint64_t until) {
        if (until > at) blocks.push_back({{"address", at}, {"size", until - at}, {"requested_size", 0}, {"state", "inactive"}, {"frames", nlohmann::json::array()}});
      };
      for (const rlmem::runtime_snapshot::block& block : each.blocks) {
        gap(block.address);
        blocks.push_back({{"address", block.address}, {"size", block.size}, {"requested_size", block.requested},
                          {"state", "active_allocated"}, {"frames", nlohmann::json::array()}});
        at = block.address + block.size;
        allocated += block.size;
        requested += block.requested;
      }
      gap(each.address + each.size);
      segments.push_back({{"device", ordinal}, {"address", each.address}, {"total_size", each.size}, {"allocated_size", allocated},
                          {"active_size", allocated}, {"requested_size", requested}, {"stream", each.stream},
                          {"segment_type", rlmem::pool_name(false)}, {"segment_pool_id", {0, 0}}, {"is_expandable", true},
                          {"frames", nlohmann::json::array()}, {"blocks", std::move(blocks)}});
    }
    nlohmann::json trace = nlohmann::json::array();
    for (const rlmem::history_event& event : taken.events) {
      nlohmann::json entry = {{"action", rlmem::trace_action_name(trace_action_of(event.action))},
                              {"addr", event.address},
                              {"size", event.size},
                              {"stream", event.stream},
                              {"time_us", event.time_us},
                              {"frames", nlohmann::json::array()}};
      if (event.action == rlmem::history_event::kind::oom) entry["device_free"] = event.device_free;
      trace.push_back(std::move(entry));
    }
    nlohmann::json traces = nlohmann::json::array();
    for (int device = 0; device < ordinal; ++device) traces.push_back(nlohmann::json::array());
    traces.push_back(std::move(trace));
    // Pages mapped into reserved address space are what torch's expandable segments do: replay
    // reads the trace that way.
    nlohmann::json document = {{"segments", std::move(segments)},
                               {"device_traces", std::move(traces)},
                               {"allocator_settings", {{"expandable_segments", true}}},
                               {"rlmem", {{"events_dropped", taken.events_dropped}}}};
    *json_out = copy_out(document.dump());
    if (*json_out == nullptr) throw std::bad_alloc();
    return runtime_outcome{};
  });
}

void* rlmem_torch_malloc(size_t size, int device, void* stream) {
  std::string why;
  void* address = torch_allocate(size, device, stream, why);
  if (address == nullptr && size > 0) rlmem::capi::throw_out_of_memory("CUDA out of memory (rlmem runtime): " + why);
  return address;
}

void* rlmem_torch_pool_malloc(size_t size, int device, void* stream) {
  std::string why;
  return torch_allocate(size, device, stream, why);
}

int rlmem_torch_prepare_libraries(int device, void* stream, char** error_out) {
  if (error_out != nullptr) *error_out = nullptr;
  if (!valid_ordinal(device)) return report(error_out, RLMEM_E_INVALID_ARGUMENT, "device " + std::to_string(device) + " is out of range");
  if (rlmem::capi::prepare_torch_library_memory(device, reinterpret_cast<std::uintptr_t>(stream))) return RLMEM_OK;
  return report(error_out, RLMEM_E_STATE,
                "torch's cuBLAS getters (at::cuda::getCurrentCUDABlasHandle, getCUDABlasLtWorkspace) are not in this process, "
                "or one failed: this stream's requests are still told apart by their callers");
}

void rlmem_torch_free(void* pointer, size_t, int device, void*) {
  if (pointer == nullptr) return;
  // A free torch makes of memory rlmem did not hand out cannot be reported to anyone: ignored.
  rlmem_runtime_free(device, reinterpret_cast<std::uintptr_t>(pointer), nullptr);
}

}  // extern "C"
