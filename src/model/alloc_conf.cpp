// SPDX-License-Identifier: MIT
// Allocator settings: PYTORCH_CUDA_ALLOC_CONF parsing (CUDAAllocatorConfig) and the settings a
// snapshot recorded.

#include <rlmem/model/allocator_settings.hpp>

#include <algorithm>
#include <bit>
#include <charconv>
#include <string>
#include <vector>

namespace rlmem {

namespace {

constexpr std::uint64_t mib = std::uint64_t{1} << 20;

basic_error<model_errc> refusal(model_errc code, std::string line) { return {code, 0, std::move(line)}; }

std::string out_of_range(std::string_view key, std::string_view value, std::uint64_t low, std::uint64_t high) {
  return std::string(key) + " '" + std::string(value.substr(0, 40)) + "' is not a whole number from " + std::to_string(low) + " to " +
         std::to_string(high);
}

bool parse_number(std::string_view text, std::uint64_t& number) {
  auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), number);
  return status == std::errc{} && end == text.data() + text.size();
}

// "[256:1,512:2,>:8]" or "4": fills the 16 buckets as the allocator does (torch >= 2.10).
// At most `max_divisions`, itself at most what a bucket holds.
result<std::array<std::uint32_t, 16>, model_errc> parse_divisions(std::string_view text, std::uint64_t max_divisions) {
  std::array<std::uint32_t, 16> buckets{};
  std::uint64_t single = 0;
  if (parse_number(text, single)) {
    if (single > max_divisions) {
      return refusal(model_errc::divisions_out_of_range, out_of_range("roundup_power2_divisions", text, 0, max_divisions));
    }
    buckets.fill(static_cast<std::uint32_t>(single));
    return buckets;
  }
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') {
    return refusal(model_errc::malformed_divisions, "roundup_power2_divisions must be a number or a [size_mb:divisions,...] list");
  }
  text = text.substr(1, text.size() - 2);
  bool first = true;
  int last_index = -1;
  while (!text.empty()) {
    std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    std::size_t colon = item.find(':');
    std::uint64_t divisions = 0;
    bool malformed = colon == std::string_view::npos || !parse_number(item.substr(colon + 1), divisions);
    if (malformed || divisions > max_divisions) {
      return refusal(malformed ? model_errc::malformed_divisions : model_errc::divisions_out_of_range,
                     "bad roundup_power2_divisions entry '" + std::string(item.substr(0, 40)) +
                         "': expected SIZE_MB:DIVISIONS, divisions from 0 to " + std::to_string(max_divisions));
    }
    std::string_view key = item.substr(0, colon);
    if (key == ">") {
      for (int i = last_index + 1; i < 16; ++i) buckets[static_cast<std::size_t>(i)] = static_cast<std::uint32_t>(divisions);
      continue;
    }
    std::uint64_t size_mb = 0;
    if (!parse_number(key, size_mb) || !std::has_single_bit(size_mb)) {
      return refusal(model_errc::divisions_key_not_power_of_two,
                     "roundup_power2_divisions keys must be powers of two in MB, not '" + std::string(key) + "'");
    }
    int index = std::min(15, std::max(0, static_cast<int>(std::bit_width(size_mb)) - 1));
    if (first) {
      for (int i = 0; i < index; ++i) buckets[static_cast<std::size_t>(i)] = static_cast<std::uint32_t>(divisions);
      first = false;
    }
    buckets[static_cast<std::size_t>(index)] = static_cast<std::uint32_t>(divisions);
    last_index = index;
  }
  return buckets;
}

}  // namespace

result<allocator_settings, model_errc> parse_alloc_conf(std::string_view conf, const alloc_conf_limits& limits) {
  // A limit above the default would wrap a size or truncate a count: it is read as the default.
  const alloc_conf_limits most;
  const std::uint64_t max_megabytes = std::min(limits.max_megabytes, most.max_megabytes);
  const std::uint64_t max_divisions = std::min(limits.max_divisions, most.max_divisions);
  allocator_settings parsed;
  while (!conf.empty()) {
    // Split on commas outside brackets.
    std::size_t depth = 0;
    std::size_t end = 0;
    for (; end < conf.size(); ++end) {
      if (conf[end] == '[') ++depth;
      if (conf[end] == ']' && depth > 0) --depth;
      if (conf[end] == ',' && depth == 0) break;
    }
    std::string item;
    for (char c : conf.substr(0, end)) {
      if (c != ' ' && c != '\t') item += c;
    }
    conf = end < conf.size() ? conf.substr(end + 1) : std::string_view{};
    if (item.empty()) continue;
    std::size_t colon = item.find(':');
    if (colon == std::string::npos) return refusal(model_errc::missing_value, "'" + item + "' has no value (key:value)");
    std::string key = item.substr(0, colon);
    std::string value = item.substr(colon + 1);
    std::uint64_t number = 0;
    if (key == "expandable_segments") {
      if (value != "True" && value != "False") return refusal(model_errc::not_true_or_false, "expandable_segments must be True or False");
      parsed.expandable_segments = value == "True";
    } else if (key == "max_split_size_mb") {
      if (!parse_number(value, number) || number < 20 || number > max_megabytes) {
        return refusal(model_errc::size_out_of_range, out_of_range("max_split_size_mb", value, 20, max_megabytes));
      }
      parsed.max_split_size = number * mib;
    } else if (key == "max_non_split_rounding_mb") {
      if (!parse_number(value, number) || number < 20 || number > max_megabytes) {
        return refusal(model_errc::size_out_of_range, out_of_range("max_non_split_rounding_mb", value, 20, max_megabytes));
      }
      parsed.max_non_split_rounding = number * mib;
    } else if (key == "roundup_power2_divisions") {
      auto divisions = parse_divisions(value, max_divisions);
      if (!divisions.ok()) return divisions.failure();
      parsed.roundup_power2_divisions = divisions.value();
    } else if (key == "garbage_collection_threshold") {
      // The whole value or nothing: no trailing text or hex; NaN and infinity fail the range.
      double threshold = -1;
      auto [parsed_end, status] = std::from_chars(value.data(), value.data() + value.size(), threshold);
      if (status != std::errc{} || parsed_end != value.data() + value.size() || !(threshold > 0 && threshold < 1)) {
        return refusal(model_errc::threshold_out_of_range,
                       "garbage_collection_threshold '" + value.substr(0, 40) + "' is not a number between 0 and 1 (both excluded)");
      }
      parsed.garbage_collection_threshold = threshold;
    } else if (key == "backend") {
      if (value != "native") return refusal(model_errc::unsupported_backend, "backend:" + value + " is not the caching allocator rlmem models");
    } else if (key.starts_with("pinned_") || key == "release_lock_on_cudamalloc" || key == "release_lock_on_hipmalloc" ||
               key == "graph_capture_record_stream_reuse" || key == "per_process_memory_fraction") {
      // No effect on device-memory decisions (host allocator, locking, graph capture).
    } else {
      return refusal(model_errc::unknown_key, "unknown allocator setting '" + key + "'");
    }
  }
  return parsed;
}

std::string to_alloc_conf(const allocator_settings& settings) {
  const allocator_settings defaults;
  std::string conf;
  auto add = [&](const std::string& item) { conf += (conf.empty() ? "" : ",") + item; };
  if (settings.expandable_segments) add("expandable_segments:True");
  if (settings.max_split_size != defaults.max_split_size) add("max_split_size_mb:" + std::to_string(settings.max_split_size / mib));
  if (settings.max_non_split_rounding != defaults.max_non_split_rounding) {
    add("max_non_split_rounding_mb:" + std::to_string(settings.max_non_split_rounding / mib));
  }
  if (settings.roundup_power2_divisions != defaults.roundup_power2_divisions) {
    std::string list;
    for (std::size_t i = 0; i < settings.roundup_power2_divisions.size(); ++i) {
      if (!list.empty()) list += ',';
      list += std::to_string(std::uint64_t{1} << i) + ":" + std::to_string(settings.roundup_power2_divisions[i]);
    }
    add("roundup_power2_divisions:[" + list + "]");
  }
  if (settings.garbage_collection_threshold > 0) {
    char digits[32];
    auto written = std::to_chars(digits, digits + sizeof digits, settings.garbage_collection_threshold);  // shortest exact form
    add("garbage_collection_threshold:" + std::string(digits, written.ptr));
  }
  return conf;
}

allocator_settings settings_of(const snapshot& snap) {
  allocator_settings settings;
  if (const plain_value* conf = snap.setting("PYTORCH_CUDA_ALLOC_CONF"); conf && !conf->text.empty()) {
    if (auto parsed = parse_alloc_conf(conf->text); parsed.ok()) return std::move(parsed).value();
  }
  if (const plain_value* expandable = snap.setting("expandable_segments")) {
    settings.expandable_segments = expandable->boolean;
  } else {
    // No setting recorded (torch before 2.5, torch_npu): expandable segments show in the file,
    // as segments the dump marks expandable or pages the trace maps and unmaps.
    settings.expandable_segments =
        std::any_of(snap.segments.begin(), snap.segments.end(), [](const segment& seg) { return seg.is_expandable; }) ||
        std::any_of(snap.events.begin(), snap.events.end(), [](const trace_event& event) {
          return event.action == trace_action::segment_map || event.action == trace_action::segment_unmap;
        });
  }
  if (const plain_value* split = snap.setting("max_split_size"); split && split->integer > 0) {
    settings.max_split_size = static_cast<std::uint64_t>(split->integer);
  }
  if (const plain_value* threshold = snap.setting("garbage_collection_threshold")) {
    settings.garbage_collection_threshold = threshold->real;
  }
  if (const plain_value* divisions = snap.setting("roundup_power2_divisions"); divisions && divisions->type == plain_value::kind::dict) {
    for (std::size_t i = 0; i < divisions->items.size() && i < 16; ++i) {
      settings.roundup_power2_divisions[i] = static_cast<std::uint32_t>(std::max<std::int64_t>(0, divisions->items[i].integer));
    }
  }
  return settings;
}

}  // namespace rlmem
