// SPDX-License-Identifier: MIT
// librlmem's C entry points: each checks its arguments, calls the same C++ the CLI runs, and
// turns every failure, exceptions included, into a status code and a one-line message.

#include "c_strings.hpp"
#include "caller_struct.hpp"

#include <rlmem/base/format.hpp>
#include <rlmem/inspect/inspect.hpp>
#include <rlmem/base/output_file.hpp>
#include <rlmem/base/regular_file.hpp>
#include <rlmem/report/report.hpp>
#include <rlmem/rlmem.h>
#include <rlmem/step_rules/step_rules.hpp>
#include <rlmem/snapshot/snapshot_reader.hpp>
#include <rlmem/inspect/views.hpp>

#include <cstddef>  // offsetof
#include <cstdlib>  // std::malloc, std::free
#include <cstring>  // std::memcpy
#include <new>      // std::bad_alloc
#include <span>
#include <string>
#include <string_view>

namespace {

// CMakeLists.txt's project version, through the generated rlmem/version.h.
constexpr char library_version[] = RLMEM_VERSION_STRING;

using rlmem::capi::layout_ending_at;

// The layouts each struct has had, oldest first (rlmem.h: what struct_size accepts).
constexpr rlmem::capi::struct_layouts<1> inspect_options_layouts{
    "rlmem_inspect_options", "call rlmem_inspect_options_init() first", {sizeof(rlmem_inspect_options)}};
static_assert(inspect_options_layouts.sizes.back() ==
                  layout_ending_at<rlmem_inspect_options>(offsetof(rlmem_inspect_options, source_name) + sizeof(const char*)),
              "rlmem_inspect_options grew: append its new layout, and keep rlmem_inspect_options_init() at the 0.2 release's");
// 0.1.0's layout (kept by 0.2 until 4d70348) ended at bytes_per_step; stopped to kendall_z came then.
constexpr rlmem::capi::struct_layouts<2> leak_verdict_layouts{
    "rlmem_leak_verdict", "set it to sizeof(rlmem_leak_verdict)",
    {layout_ending_at<rlmem_leak_verdict>(offsetof(rlmem_leak_verdict, bytes_per_step) + sizeof(int64_t)),
     sizeof(rlmem_leak_verdict)}};
static_assert(leak_verdict_layouts.sizes.back() ==
                  layout_ending_at<rlmem_leak_verdict>(offsetof(rlmem_leak_verdict, kendall_z) + sizeof(double)),
              "rlmem_leak_verdict grew: append its new layout (and rlmem_step_judgment embeds it: a new layout of that too)");
constexpr rlmem::capi::struct_layouts<1> step_rules_layouts{
    "rlmem_step_rules", "call rlmem_step_rules_init() first", {sizeof(rlmem_step_rules)}};
static_assert(step_rules_layouts.sizes.back() ==
                  layout_ending_at<rlmem_step_rules>(offsetof(rlmem_step_rules, headroom_steps) + sizeof(int64_t)),
              "rlmem_step_rules grew: append its new layout, and keep rlmem_step_rules_init() at the 0.2 release's");
constexpr rlmem::capi::struct_layouts<1> step_judgment_layouts{
    "rlmem_step_judgment", "set it to sizeof(rlmem_step_judgment)", {sizeof(rlmem_step_judgment)}};
static_assert(step_judgment_layouts.sizes.back() ==
                  layout_ending_at<rlmem_step_judgment>(offsetof(rlmem_step_judgment, new_ooms) + sizeof(int64_t)),
              "rlmem_step_judgment grew: append its new layout");

// A failure on its way out: the status and the line for the caller.
struct failure {
  int status;
  std::string message;
};


using rlmem::capi::copy_out;

void set_error(char** error_out, const std::string& message) noexcept {
  if (error_out != nullptr) *error_out = copy_out(message);
}

rlmem_inspect_options inspect_defaults() noexcept {
  rlmem_inspect_options options{};
  options.struct_size = sizeof(rlmem_inspect_options);
  options.device = -1;
  options.top = 10;
  return options;
}

// The caller's options (NULL: the defaults) as this library's struct, or what is wrong with them.
bool read_options(const rlmem_inspect_options* caller, rlmem_inspect_options& read, failure& problem) {
  read = inspect_defaults();
  if (caller == nullptr) return true;
  if (std::string why; !rlmem::capi::known_layout(inspect_options_layouts, rlmem::capi::caller_struct_size(caller), why)) {
    problem = {RLMEM_E_INVALID_ARGUMENT, why};
    return false;
  }
  read = rlmem::capi::read_caller_struct(caller, inspect_defaults());
  return true;
}

// Reads the options into inspect_options, or says what is wrong with them: the numbers in the
// CLI's words (check_inspect_options), so that a value is refused alike by the CLI and here.
bool convert_options(const rlmem_inspect_options* given, rlmem::inspect_options& options, failure& problem) {
  options.device = given->device;
  options.top = given->top;
  options.limit_bytes = given->limit_bytes;
  if (std::string refusal = rlmem::check_inspect_options(options); !refusal.empty()) {
    problem = {RLMEM_E_INVALID_ARGUMENT, refusal};
    return false;
  }
  if (given->step_marker != nullptr) options.step_marker = given->step_marker;
  if (given->category_rules != nullptr) {
    auto rules = rlmem::parse_category_rules(given->category_rules);
    if (!rules.ok()) {
      problem = {RLMEM_E_INVALID_ARGUMENT, "category rules: " + rules.failure().detail};
      return false;
    }
    options.category_rules = std::move(rules).value();
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
    rlmem_inspect_options caller_options;
    rlmem::inspect_options options;
    if (!read_options(given, caller_options, problem) || !convert_options(&caller_options, options, problem)) {
      set_error(error_out, problem.message);
      return problem.status;
    }
    std::string source = caller_options.source_name != nullptr ? std::string(caller_options.source_name) : default_name;
    rlmem::result<rlmem::snapshot> loaded = read();
    if (!loaded.ok()) {
      set_error(error_out, source + ": " + rlmem::describe(loaded.failure()));
      return RLMEM_E_BAD_INPUT;
    }
    auto checked = rlmem::inspect_checked(loaded.value(), options);
    if (!checked.ok()) {
      set_error(error_out, source + ": " + checked.failure().detail);
      return RLMEM_E_INVALID_ARGUMENT;
    }
    const rlmem::inspection& result = checked.value();
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

int rlmem_inspect_options_init_sized(rlmem_inspect_options* options, size_t struct_size) {
  return rlmem::capi::init_caller_struct(options, struct_size, inspect_options_layouts, inspect_defaults());
}

// Binaries built against the 0.2 release's header (and ctypes) call this one: it writes that layout.
void(rlmem_inspect_options_init)(rlmem_inspect_options* options) {
  rlmem_inspect_options_init_sized(options, inspect_options_layouts.sizes[0]);
}

int rlmem_check_inspect_option(const char* option, const char* value, char** error_out) {
  if (error_out != nullptr) *error_out = nullptr;
  try {
    if (option == nullptr || value == nullptr) {
      set_error(error_out, "option and value must not be NULL");
      return RLMEM_E_INVALID_ARGUMENT;
    }
    const std::string_view name(option);
    const rlmem::whole_number_option* found = nullptr;
    for (const rlmem::whole_number_option* known : {&rlmem::device_option, &rlmem::top_option, &rlmem::limit_option}) {
      if (known->flag == name) found = known;
    }
    if (found == nullptr) {
      set_error(error_out, "'" + rlmem::printable_text(name.substr(0, 40)) +
                               "' is not an option of rlmem_inspect_options (--device, --top, --limit)");
      return RLMEM_E_INVALID_ARGUMENT;
    }
    std::string refusal = rlmem::check_option(*found, value);
    if (refusal.empty()) return RLMEM_OK;
    set_error(error_out, refusal);
    return RLMEM_E_INVALID_ARGUMENT;
  } catch (const std::bad_alloc&) {
    set_error(error_out, "out of memory");
    return RLMEM_E_NO_MEMORY;
  }
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

int rlmem_read_option_file(const char* path, char** text_out, size_t* size_out, char** error_out) {
  if (error_out != nullptr) *error_out = nullptr;
  if (path == nullptr || text_out == nullptr || size_out == nullptr) {
    set_error(error_out, path == nullptr       ? "path is NULL"
                         : text_out == nullptr ? "text_out is NULL: pass the address of a char* to receive the text"
                                               : "size_out is NULL: pass the address of a size_t to receive the size");
    return RLMEM_E_INVALID_ARGUMENT;
  }
  *text_out = nullptr;
  *size_out = 0;
  try {
    auto read = rlmem::read_option_file(path);
    if (!read.ok()) {
      set_error(error_out, read.failure().detail);
      return RLMEM_E_BAD_INPUT;
    }
    const std::string& text = read.value();
    *text_out = copy_out(text);
    if (*text_out == nullptr) {
      set_error(error_out, "out of memory");
      return RLMEM_E_NO_MEMORY;
    }
    *size_out = text.size();
    return RLMEM_OK;
  } catch (const std::bad_alloc&) {
    set_error(error_out, "out of memory");
    return RLMEM_E_NO_MEMORY;
  } catch (...) {
    set_error(error_out, "internal error: unknown exception");
    return RLMEM_E_INTERNAL;
  }
}

int rlmem_write_file(const char* path, const void* data, size_t size, int* error_number_out, char** error_out) {
  if (error_out != nullptr) *error_out = nullptr;
  if (error_number_out != nullptr) *error_number_out = 0;
  if (path == nullptr || (data == nullptr && size > 0)) {
    set_error(error_out, path == nullptr ? "path is NULL" : "data is NULL but size is " + std::to_string(size));
    return RLMEM_E_INVALID_ARGUMENT;
  }
  try {
    rlmem::output_written written =
        rlmem::write_output_file(path, std::string_view(static_cast<const char*>(data), data == nullptr ? 0 : size));
    if (written.error_number == 0) return RLMEM_OK;
    if (error_number_out != nullptr) *error_number_out = written.error_number;
    set_error(error_out, written.problem);
    return RLMEM_E_BAD_INPUT;
  } catch (...) {
    set_error(error_out, "internal error: unknown exception");
    return RLMEM_E_INTERNAL;
  }
}

namespace {

void fill_verdict(const rlmem::growth_verdict& growth, rlmem_leak_verdict& verdict) {
  verdict.struct_size = sizeof(rlmem_leak_verdict);
  verdict.leaking = growth.growing ? 1 : 0;
  verdict.first_step = growth.first;
  verdict.steps = growth.steps;
  verdict.bytes_per_step = growth.bytes_per_step;
  verdict.stopped = growth.stopped ? 1 : 0;
  verdict.last_event = growth.last_event;
  verdict.events = growth.events;
  verdict.period = growth.period;
  verdict.noise_bytes = growth.noise_bytes;
  verdict.level_bytes = growth.level_bytes;
  verdict.z = growth.z;
  verdict.kendall_z = growth.kendall_z;
}

bool fraction_in_range(double value) { return value >= 0 && value <= 1; }  // false for NaN

// The C thresholds as the C++ rules; false when one is out of range.
bool rules_of(const rlmem_step_rules& given, rlmem::step_rules& rules) {
  if (given.leak_window < 3 || given.leak_window > rlmem::growth_rule{}.max_points) return false;
  if (!(given.leak_min_z >= 0) || given.leak_min_events < 2 || !fraction_in_range(given.leak_min_relative_rate) ||
      given.leak_min_bytes_per_step < 0 || !(given.leak_stop_after_periods >= 1 && given.leak_stop_after_periods <= 1000)) {
    return false;
  }
  if (given.fragmentation_bytes < 0 || !fraction_in_range(given.fragmentation_fraction) ||
      given.fragmentation_window < 1 || given.fragmentation_window > 1000000 || !fraction_in_range(given.headroom_fraction) ||
      given.headroom_steps < 0) {
    return false;
  }
  rules.leak_window = given.leak_window;
  rules.leak.min_z = given.leak_min_z;
  rules.leak.min_events = given.leak_min_events;
  rules.leak.min_relative_rate = given.leak_min_relative_rate;
  rules.leak.min_bytes_per_step = given.leak_min_bytes_per_step;
  rules.leak.stop_after_periods = given.leak_stop_after_periods;
  rules.fragmentation_bytes = given.fragmentation_bytes;
  rules.fragmentation_fraction = given.fragmentation_fraction;
  rules.fragmentation_window = given.fragmentation_window;
  rules.headroom_fraction = given.headroom_fraction;
  rules.headroom_steps = given.headroom_steps;
  return true;
}

}  // namespace

int rlmem_leak_check(const int64_t* bytes, const uint64_t* /*counts*/, size_t n, size_t /*min_steady_steps*/,
                     rlmem_leak_verdict* verdict) {
  if (verdict == nullptr || (bytes == nullptr && n > 0)) return RLMEM_E_INVALID_ARGUMENT;
  const std::size_t caller_size = rlmem::capi::caller_struct_size(verdict);
  if (std::string why; !rlmem::capi::known_layout(leak_verdict_layouts, caller_size, why)) return RLMEM_E_INVALID_ARGUMENT;
  try {
    std::span<const std::int64_t> series(bytes, bytes == nullptr ? 0 : n);
    rlmem_leak_verdict whole{};
    fill_verdict(rlmem::judge_growth(series), whole);
    rlmem::capi::write_caller_struct(verdict, whole, caller_size);
    return RLMEM_OK;
  } catch (...) {
    return RLMEM_E_INTERNAL;
  }
}

rlmem_step_rules step_rules_defaults() noexcept {
  const rlmem::step_rules defaults;
  rlmem_step_rules rules{};
  rules.struct_size = sizeof(rlmem_step_rules);
  rules.leak_window = defaults.leak_window;
  rules.leak_min_z = defaults.leak.min_z;
  rules.leak_min_events = defaults.leak.min_events;
  rules.leak_min_relative_rate = defaults.leak.min_relative_rate;
  rules.leak_min_bytes_per_step = defaults.leak.min_bytes_per_step;
  rules.leak_stop_after_periods = defaults.leak.stop_after_periods;
  rules.fragmentation_bytes = defaults.fragmentation_bytes;
  rules.fragmentation_fraction = defaults.fragmentation_fraction;
  rules.fragmentation_window = defaults.fragmentation_window;
  rules.headroom_fraction = defaults.headroom_fraction;
  rules.headroom_steps = defaults.headroom_steps;
  return rules;
}

int rlmem_step_rules_init_sized(rlmem_step_rules* rules, size_t struct_size) {
  return rlmem::capi::init_caller_struct(rules, struct_size, step_rules_layouts, step_rules_defaults());
}

// Binaries built against the 0.2 release's header (and ctypes) call this one: it writes that layout.
void(rlmem_step_rules_init)(rlmem_step_rules* rules) { rlmem_step_rules_init_sized(rules, step_rules_layouts.sizes[0]); }

int rlmem_judge_step(const rlmem_step_sample* history, size_t n, int64_t peak_allocated_before, const rlmem_step_rules* rules,
                     rlmem_step_judgment* judgment) {
  if (judgment == nullptr || (history == nullptr && n > 0)) return RLMEM_E_INVALID_ARGUMENT;
  const std::size_t judgment_size = rlmem::capi::caller_struct_size(judgment);
  std::string why;
  if (!rlmem::capi::known_layout(step_judgment_layouts, judgment_size, why)) return RLMEM_E_INVALID_ARGUMENT;
  rlmem::step_rules chosen;
  if (rules != nullptr) {
    if (!rlmem::capi::known_layout(step_rules_layouts, rlmem::capi::caller_struct_size(rules), why)) return RLMEM_E_INVALID_ARGUMENT;
    if (!rules_of(rlmem::capi::read_caller_struct(rules, step_rules_defaults()), chosen)) return RLMEM_E_INVALID_ARGUMENT;
  }
  try {
    std::vector<rlmem::step_sample> samples(n);
    for (std::size_t i = 0; i < n; ++i) {
      const rlmem_step_sample& given = history[i];
      samples[i] = {given.step, given.allocated, given.reserved, given.inactive_split, given.step_peak_allocated,
                    given.step_peak_reserved, given.allocations, given.num_alloc_retries, given.num_ooms,
                    given.device_free, given.device_total, given.limit};
    }
    const rlmem::step_judgment judged = rlmem::judge_step(samples, peak_allocated_before, chosen);
    rlmem_step_judgment whole{};
    fill_verdict(judged.leak, whole.leak);
    whole.leak_count_before = judged.leak_count_before;
    whole.peak_allocated_seen = judged.peak_allocated_seen;
    whole.unused_reserved = judged.unused_reserved;
    whole.fragmented = judged.fragmented ? 1 : 0;
    whole.fragmentation = judged.fragmentation ? 1 : 0;
    whole.fragmentation_growth = judged.fragmentation_growth;
    whole.fragmentation_steps = judged.fragmentation_steps;
    whole.alloc_retries = judged.alloc_retries ? 1 : 0;
    whole.new_alloc_retries = judged.new_alloc_retries;
    whole.headroom = judged.headroom ? 1 : 0;
    whole.outside_bytes = judged.outside_bytes;
    whole.limit_bytes = judged.limit_bytes;
    whole.free_at_peak = judged.free_at_peak;
    whole.steps_to_limit = judged.steps_to_limit.value_or(-1);
    whole.oom = judged.oom ? 1 : 0;
    whole.new_ooms = judged.new_ooms;
    rlmem::capi::write_caller_struct(judgment, whole, judgment_size);
    return RLMEM_OK;
  } catch (const std::bad_alloc&) {
    return RLMEM_E_NO_MEMORY;
  } catch (...) {
    return RLMEM_E_INTERNAL;
  }
}

int rlmem_judge_imbalance(const int64_t* figure, size_t n, double fraction, int64_t min_bytes, int* imbalanced, size_t* high,
                          size_t* low) {
  if (imbalanced == nullptr || high == nullptr || low == nullptr || (figure == nullptr && n > 0) ||
      !fraction_in_range(fraction) || min_bytes < 0) {
    return RLMEM_E_INVALID_ARGUMENT;
  }
  const rlmem::imbalance_verdict verdict = rlmem::judge_imbalance({figure, figure == nullptr ? 0 : n}, fraction, min_bytes);
  *imbalanced = verdict.imbalanced ? 1 : 0;
  *high = verdict.high;
  *low = verdict.low;
  return RLMEM_OK;
}

}  // extern "C"
