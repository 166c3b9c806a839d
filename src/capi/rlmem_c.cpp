// SPDX-License-Identifier: MIT
// librlmem's C entry points: each checks its arguments, calls the same C++ the CLI runs, and
// turns every failure, exceptions included, into a status code and a one-line message.

#include <rlmem/inspect.hpp>
#include <rlmem/report.hpp>
#include <rlmem/rlmem.h>
#include <rlmem/snapshot_reader.hpp>
#include <rlmem/views.hpp>

#include <cstdlib>  // std::malloc, std::free
#include <cstring>  // std::memcpy
#include <new>      // std::bad_alloc
#include <span>
#include <string>

namespace {

constexpr char library_version[] = "0.2.0";
static_assert(RLMEM_VERSION_MAJOR == 0 && RLMEM_VERSION_MINOR == 2 && RLMEM_VERSION_PATCH == 0,
              "rlmem.h's version and library_version must move together");

// A failure on its way out: the status and the line for the caller.
struct failure {
  int status;
  std::string message;
};

// A malloc'd copy (freed by rlmem_string_free, so any language's caller can free it), or
// nullptr when even that fails.
char* copy_out(const std::string& text) noexcept {
  auto* copy = static_cast<char*>(std::malloc(text.size() + 1));
  if (copy != nullptr) std::memcpy(copy, text.data(), text.size() + 1);
  return copy;
}

void set_error(char** error_out, const std::string& message) noexcept {
  if (error_out != nullptr) *error_out = copy_out(message);
}

// Reads the caller's options into inspect_options, or says what is wrong with them.
bool convert_options(const rlmem_inspect_options* given, rlmem::inspect_options& options, failure& problem) {
  if (given == nullptr) return true;
  if (given->struct_size != sizeof(rlmem_inspect_options)) {
    problem = {RLMEM_E_INVALID_ARGUMENT, "rlmem_inspect_options.struct_size is " + std::to_string(given->struct_size) +
                                             ", this librlmem (" + library_version + ") expects " +
                                             std::to_string(sizeof(rlmem_inspect_options)) +
                                             ": call rlmem_inspect_options_init() first"};
    return false;
  }
  if (given->device < -1) {
    problem = {RLMEM_E_INVALID_ARGUMENT, "device " + std::to_string(given->device) + " is not a CUDA device (-1: the default)"};
    return false;
  }
  if (given->top == 0) {
    problem = {RLMEM_E_INVALID_ARGUMENT, "top must be at least 1"};
    return false;
  }
  if (given->limit_bytes < 0) {
    problem = {RLMEM_E_INVALID_ARGUMENT, "limit_bytes " + std::to_string(given->limit_bytes) + " is negative (0: derived)"};
    return false;
  }
  options.device = given->device;
  options.top = given->top;
  options.limit_bytes = given->limit_bytes;
  if (given->step_marker != nullptr) options.step_marker = given->step_marker;
  if (given->category_rules != nullptr) {
    std::string message;
    if (!rlmem::parse_category_rules(given->category_rules, options.category_rules, message)) {
      problem = {RLMEM_E_INVALID_ARGUMENT, "category rules: " + message};
      return false;
    }
    if (options.category_rules.empty()) {
      problem = {RLMEM_E_INVALID_ARGUMENT, "category rules: no rules"};
      return false;
    }
  }
  return true;
}

// The inspect JSON document, or (html) the page of `rlmem report`.
std::string render(const rlmem::snapshot& snap, const rlmem::inspection& result, const rlmem::inspect_options& options,
                   const std::string& source, bool html) {
  if (!html) return rlmem::render_inspection_json(snap, result, source);
  rlmem::memory_views views = rlmem::build_memory_views(snap, result, options.category_rules);
  return rlmem::render_inspection_html(snap, result, views, source);
}

// The body shared by the path and bytes entry points of inspect and report: `read` returns the
// snapshot result.
template <class ReadFn>
int inspect_to_json(const rlmem_inspect_options* given, const std::string& default_name, ReadFn read, char** json_out,
                    char** error_out, bool html = false) noexcept {
  try {
    failure problem{RLMEM_OK, {}};
    rlmem::inspect_options options;
    if (!convert_options(given, options, problem)) {
      set_error(error_out, problem.message);
      return problem.status;
    }
    std::string source = given != nullptr && given->source_name != nullptr ? std::string(given->source_name) : default_name;
    rlmem::result<rlmem::snapshot> loaded = read();
    if (!loaded.ok()) {
      set_error(error_out, source + ": " + rlmem::describe(loaded.failure()));
      return RLMEM_E_BAD_INPUT;
    }
    rlmem::inspection result;
    std::string message;
    if (!rlmem::inspect_checked(loaded.value(), options, result, message)) {
      set_error(error_out, source + ": " + message);
      return RLMEM_E_INVALID_ARGUMENT;
    }
    if (html && !rlmem::html_report_available()) {
      set_error(error_out, "this librlmem was built without the report page's browser assets (node and npm were not found when "
                           "it was configured)");
      return RLMEM_E_INTERNAL;
    }
    char* json = copy_out(render(loaded.value(), result, options, source, html));
    if (json == nullptr) throw std::bad_alloc();
    *json_out = json;
    return RLMEM_OK;
  } catch (const std::bad_alloc&) {
    set_error(error_out, "out of memory");
    return RLMEM_E_NO_MEMORY;
  } catch (const std::exception& unexpected) {
    set_error(error_out, std::string("internal error: ") + unexpected.what());
  } catch (...) {
    set_error(error_out, "internal error: unknown exception");
  }
  return RLMEM_E_INTERNAL;
}

// Clears the outputs so a caller never frees stale pointers; false when json_out is missing.
bool start_outputs(char** json_out, char** error_out) noexcept {
  if (error_out != nullptr) *error_out = nullptr;
  if (json_out == nullptr) {
    set_error(error_out, "json_out is NULL: pass the address of a char* to receive the document");
    return false;
  }
  *json_out = nullptr;
  return true;
}

}  // namespace

extern "C" {

const char* rlmem_version(void) { return library_version; }

const char* rlmem_status_name(int status) {
  switch (status) {
    case RLMEM_OK: return "RLMEM_OK";
    case RLMEM_E_INVALID_ARGUMENT: return "RLMEM_E_INVALID_ARGUMENT";
    case RLMEM_E_BAD_INPUT: return "RLMEM_E_BAD_INPUT";
    case RLMEM_E_NO_MEMORY: return "RLMEM_E_NO_MEMORY";
    case RLMEM_E_INTERNAL: return "RLMEM_E_INTERNAL";
    case RLMEM_E_STATE: return "RLMEM_E_STATE";
    case RLMEM_E_DEVICE: return "RLMEM_E_DEVICE";
    default: return "RLMEM_E_UNKNOWN";
  }
}

void rlmem_string_free(char* text) { std::free(text); }

void rlmem_inspect_options_init(rlmem_inspect_options* options) {
  if (options == nullptr) return;
  *options = rlmem_inspect_options{};
  options->struct_size = sizeof(rlmem_inspect_options);
  options->device = -1;
  options->top = 10;
}

int rlmem_inspect_file(const char* path, const rlmem_inspect_options* options, char** json_out, char** error_out) {
  if (!start_outputs(json_out, error_out)) return RLMEM_E_INVALID_ARGUMENT;
  if (path == nullptr) {
    set_error(error_out, "path is NULL");
    return RLMEM_E_INVALID_ARGUMENT;
  }
  return inspect_to_json(options, path, [path] { return rlmem::read_snapshot_file(path); }, json_out, error_out);
}

int rlmem_inspect_bytes(const void* data, size_t size, const rlmem_inspect_options* options, char** json_out,
                        char** error_out) {
  if (!start_outputs(json_out, error_out)) return RLMEM_E_INVALID_ARGUMENT;
  if (data == nullptr && size > 0) {
    set_error(error_out, "data is NULL but size is " + std::to_string(size));
    return RLMEM_E_INVALID_ARGUMENT;
  }
  std::span<const std::byte> bytes(static_cast<const std::byte*>(data), data == nullptr ? 0 : size);
  return inspect_to_json(options, "<bytes>", [bytes] { return rlmem::read_snapshot_bytes(bytes); }, json_out, error_out);
}

int rlmem_report_file(const char* path, const rlmem_inspect_options* options, char** html_out, char** error_out) {
  if (!start_outputs(html_out, error_out)) return RLMEM_E_INVALID_ARGUMENT;
  if (path == nullptr) {
    set_error(error_out, "path is NULL");
    return RLMEM_E_INVALID_ARGUMENT;
  }
  return inspect_to_json(options, path, [path] { return rlmem::read_snapshot_file(path); }, html_out, error_out, true);
}

int rlmem_report_bytes(const void* data, size_t size, const rlmem_inspect_options* options, char** html_out, char** error_out) {
  if (!start_outputs(html_out, error_out)) return RLMEM_E_INVALID_ARGUMENT;
  if (data == nullptr && size > 0) {
    set_error(error_out, "data is NULL but size is " + std::to_string(size));
    return RLMEM_E_INVALID_ARGUMENT;
  }
  std::span<const std::byte> bytes(static_cast<const std::byte*>(data), data == nullptr ? 0 : size);
  return inspect_to_json(options, "<bytes>", [bytes] { return rlmem::read_snapshot_bytes(bytes); }, html_out, error_out, true);
}

int rlmem_leak_check(const int64_t* bytes, const uint64_t* counts, size_t n, size_t min_steady_steps,
                     rlmem_leak_verdict* verdict) {
  if (verdict == nullptr || verdict->struct_size != sizeof(rlmem_leak_verdict) || (bytes == nullptr && n > 0)) {
    return RLMEM_E_INVALID_ARGUMENT;
  }
  try {
    std::span<const std::int64_t> series(bytes, bytes == nullptr ? 0 : n);
    std::span<const std::uint64_t> live_counts(counts, counts == nullptr ? 0 : n);
    rlmem::leak_trend trend = rlmem::leak_trend_of(
        series, live_counts, min_steady_steps == 0 ? rlmem::default_min_steady_steps : min_steady_steps);
    verdict->leaking = trend.leaking ? 1 : 0;
    verdict->first_step = trend.first_step;
    verdict->steps = trend.steps;
    verdict->bytes_per_step = trend.bytes_per_step;
    return RLMEM_OK;
  } catch (...) {
    return RLMEM_E_INTERNAL;
  }
}

}  // extern "C"
