// SPDX-License-Identifier: MIT
// Parsing one line of a StepMonitor log (docs/schema/steplog.schema.json): strict on the keys
// watch needs, silent on the ones it does not, so a newer writer's extra keys do no harm.

#include <rlmem/watch/watch.hpp>

#include <nlohmann/json.hpp>

#include <limits>

namespace rlmem {

namespace {

using json = nlohmann::json;

bool fail(std::string& message, std::string text) {
  message = std::move(text);
  return false;
}

// A non-negative integer that fits int64 (Python writes ints; 1.5e9 is refused, not rounded).
bool whole_number(const json& value, std::int64_t& out) {
  if (value.is_number_unsigned()) {
    if (value.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return false;
    out = static_cast<std::int64_t>(value.get<std::uint64_t>());
    return true;
  }
  if (!value.is_number_integer() || value.get<std::int64_t>() < 0) return false;
  out = value.get<std::int64_t>();
  return true;
}

bool required_count(const json& object, const char* key, std::int64_t& out, std::string& message) {
  auto found = object.find(key);
  if (found == object.end()) return fail(message, std::string("'") + key + "' missing");
  if (!whole_number(*found, out)) return fail(message, std::string("'") + key + "' is not a non-negative integer");
  return true;
}

// An optional key: absent and null both leave `out` empty.
bool optional_count(const json& object, const char* key, std::optional<std::int64_t>& out, std::string& message) {
  auto found = object.find(key);
  if (found == object.end() || found->is_null()) return true;
  std::int64_t value = 0;
  if (!whole_number(*found, value)) return fail(message, std::string("'") + key + "' is not a non-negative integer");
  out = value;
  return true;
}

bool optional_text(const json& object, const char* key, std::string& out, std::string& message) {
  auto found = object.find(key);
  if (found == object.end() || found->is_null()) return true;
  if (!found->is_string()) return fail(message, std::string("'") + key + "' is not a string");
  out = found->get<std::string>();
  return true;
}

// A seconds figure of the runtime: absent or null leaves it empty.
bool optional_seconds(const json& object, const char* key, std::optional<double>& out) {
  auto found = object.find(key);
  if (found == object.end() || found->is_null()) return true;
  auto seconds = found->find("seconds");
  if (!found->is_object() || seconds == found->end() || !seconds->is_number() || seconds->get<double>() < 0) return false;
  out = seconds->get<double>();
  return true;
}

bool parse_runtime_tag(const json& item, std::size_t index, steplog_runtime_tag& tag, std::string& message) {
  std::string where = "runtime_tags[" + std::to_string(index) + "]";
  if (!item.is_object()) return fail(message, where + " is not an object");
  auto name = item.find("name");
  if (name == item.end() || !name->is_string()) return fail(message, where + ".name missing or not a string");
  tag.name = name->get<std::string>();
  auto paused = item.find("paused");
  if (paused != item.end() && !paused->is_boolean()) return fail(message, where + ".paused is not true or false");
  tag.paused = paused != item.end() && paused->get<bool>();
  for (auto [key, out] : {std::pair{"allocated_bytes", &tag.allocated}, std::pair{"mapped_bytes", &tag.mapped}}) {
    auto counter = item.find(key);
    if (counter == item.end() || !counter->is_object()) return fail(message, where + "." + key + " missing or not an object");
    if (!required_count(*counter, "current", *out, message)) return fail(message, where + "." + key + ": " + message);
  }
  if (!required_count(item, "pauses", tag.pauses, message)) return fail(message, where + ": " + message);
  if (!optional_seconds(item, "last_pause", tag.last_pause_seconds) || !optional_seconds(item, "last_resume", tag.last_resume_seconds)) {
    return fail(message, where + ": last_pause or last_resume has no seconds");
  }
  return true;
}

bool parse_alert(const json& item, std::size_t index, steplog_alert& alert, std::string& message) {
  std::string where = "alerts[" + std::to_string(index) + "]";
  if (!item.is_object()) return fail(message, where + " is not an object");
  auto kind = item.find("kind");
  auto text = item.find("message");
  if (kind == item.end() || !kind->is_string() || kind->get_ref<const std::string&>().empty()) {
    return fail(message, where + ": 'kind' missing or not a string");
  }
  if (text == item.end() || !text->is_string()) return fail(message, where + ": 'message' missing or not a string");
  alert.kind = kind->get<std::string>();
  alert.message = text->get<std::string>();
  std::string detail;
  // bytes_per_step is a leak's growth: never negative.
  bool ok = required_count(item, "rank", alert.rank, detail) && optional_count(item, "since_step", alert.since_step, detail) &&
            optional_count(item, "bytes_per_step", alert.bytes_per_step, detail) && optional_text(item, "site", alert.site, detail) &&
            optional_text(item, "snapshot", alert.snapshot, detail);
  if (!ok) return fail(message, where + ": " + detail);
  auto cleared = item.find("cleared");
  if (cleared != item.end() && !cleared->is_null()) {
    if (!cleared->is_boolean()) return fail(message, where + ": 'cleared' is not true or false");
    alert.cleared = cleared->get<bool>();
  }
  return true;
}

}  // namespace

bool parse_steplog_line(std::string_view line, steplog_record& out, std::string& message) {
  json document = json::parse(line.begin(), line.end(), nullptr, false);
  if (document.is_discarded()) return fail(message, "not JSON");
  if (!document.is_object()) return fail(message, "not a JSON object");
  auto schema = document.find("schema");
  if (schema == document.end() || !schema->is_string()) return fail(message, "no 'schema' key: not a StepMonitor line");
  if (schema->get_ref<const std::string&>() != steplog_schema) {
    return fail(message, "schema '" + schema->get<std::string>().substr(0, 40) + "' is not " + std::string(steplog_schema));
  }
  steplog_record record;
  auto time = document.find("time");
  if (time == document.end() || !time->is_number()) return fail(message, "'time' missing or not a number");
  record.time = time->get<double>();
  auto seconds = document.find("step_seconds");
  if (seconds != document.end() && !seconds->is_null()) {
    if (!seconds->is_number()) return fail(message, "'step_seconds' is not a number");
    record.step_seconds = seconds->get<double>();
  }
  bool ok = required_count(document, "step", record.step, message) && required_count(document, "rank", record.rank, message) &&
            required_count(document, "world_size", record.world_size, message) &&
            required_count(document, "device", record.device, message) &&
            required_count(document, "allocated", record.allocated, message) &&
            required_count(document, "reserved", record.reserved, message) && required_count(document, "active", record.active, message) &&
            required_count(document, "inactive_split", record.inactive_split, message) &&
            required_count(document, "step_peak_allocated", record.step_peak_allocated, message) &&
            optional_count(document, "step_peak_reserved", record.step_peak_reserved, message) &&
            required_count(document, "allocations", record.allocations, message) &&
            required_count(document, "num_alloc_retries", record.num_alloc_retries, message) &&
            required_count(document, "num_ooms", record.num_ooms, message) &&
            required_count(document, "device_free", record.device_free, message) &&
            required_count(document, "device_total", record.device_total, message) &&
            optional_count(document, "limit", record.limit, message);
  if (!ok) return false;
  if (record.world_size < 1) return fail(message, "'world_size' is 0");
  auto per_step = document.find("peak_is_per_step");
  if (per_step != document.end() && !per_step->is_null()) {
    if (!per_step->is_boolean()) return fail(message, "'peak_is_per_step' is not true or false");
    record.peak_is_per_step = per_step->get<bool>();
  }
  auto alerts = document.find("alerts");
  if (alerts == document.end() || !alerts->is_array()) return fail(message, "'alerts' missing or not an array");
  for (std::size_t i = 0; i < alerts->size(); ++i) {
    steplog_alert alert;
    if (!parse_alert((*alerts)[i], i, alert, message)) return false;
    record.alerts.push_back(std::move(alert));
  }
  auto tags = document.find("runtime_tags");
  if (tags != document.end() && !tags->is_null()) {
    if (!tags->is_array()) return fail(message, "'runtime_tags' is not an array");
    for (std::size_t i = 0; i < tags->size(); ++i) {
      steplog_runtime_tag tag;
      if (!parse_runtime_tag((*tags)[i], i, tag, message)) return false;
      if (record.runtime_tags.size() < steplog_max_runtime_tags) {
        record.runtime_tags.push_back(std::move(tag));
      } else {
        ++record.runtime_tags_left_out;
      }
    }
  }
  out = std::move(record);
  return true;
}

}  // namespace rlmem
