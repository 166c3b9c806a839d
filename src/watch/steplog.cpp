// SPDX-License-Identifier: MIT
// Parsing one line of a StepMonitor log (docs/schema/steplog.schema.json): strict on the keys
// watch needs, silent on the ones it does not, so a newer writer's extra keys do no harm.

#include <rlmem/watch/watch.hpp>

#include <nlohmann/json.hpp>

#include <limits>

namespace rlmem {

namespace {

using json = nlohmann::json;

using line_check = result<void, watch_errc>;

basic_error<watch_errc> refusal(watch_errc code, std::string line) { return {code, 0, std::move(line)}; }

// The same failure of a part of the line, its reason behind `where` ("alerts[0]: ").
basic_error<watch_errc> within(const std::string& where, const basic_error<watch_errc>& inner) {
  return {inner.code, 0, where + inner.detail};
}

// Missing when `found` is the object's end, else of the wrong type.
watch_errc missing_or_wrong(const json& object, json::const_iterator found) {
  return found == object.end() ? watch_errc::missing_key : watch_errc::wrong_type;
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

line_check required_count(const json& object, const char* key, std::int64_t& out) {
  auto found = object.find(key);
  if (found == object.end()) return refusal(watch_errc::missing_key, std::string("'") + key + "' missing");
  if (!whole_number(*found, out)) return refusal(watch_errc::not_a_count, std::string("'") + key + "' is not a non-negative integer");
  return {};
}

// An optional key: absent and null both leave `out` empty.
line_check optional_count(const json& object, const char* key, std::optional<std::int64_t>& out) {
  auto found = object.find(key);
  if (found == object.end() || found->is_null()) return {};
  std::int64_t value = 0;
  if (!whole_number(*found, value)) return refusal(watch_errc::not_a_count, std::string("'") + key + "' is not a non-negative integer");
  out = value;
  return {};
}

line_check optional_text(const json& object, const char* key, std::string& out) {
  auto found = object.find(key);
  if (found == object.end() || found->is_null()) return {};
  if (!found->is_string()) return refusal(watch_errc::wrong_type, std::string("'") + key + "' is not a string");
  out = found->get<std::string>();
  return {};
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

result<steplog_runtime_tag, watch_errc> parse_runtime_tag(const json& item, std::size_t index) {
  std::string where = "runtime_tags[" + std::to_string(index) + "]";
  if (!item.is_object()) return refusal(watch_errc::wrong_type, where + " is not an object");
  steplog_runtime_tag tag;
  auto name = item.find("name");
  if (name == item.end() || !name->is_string()) return refusal(missing_or_wrong(item, name), where + ".name missing or not a string");
  tag.name = name->get<std::string>();
  auto paused = item.find("paused");
  if (paused != item.end() && !paused->is_boolean()) return refusal(watch_errc::wrong_type, where + ".paused is not true or false");
  tag.paused = paused != item.end() && paused->get<bool>();
  for (auto [key, out] : {std::pair{"allocated_bytes", &tag.allocated}, std::pair{"mapped_bytes", &tag.mapped}}) {
    auto counter = item.find(key);
    if (counter == item.end() || !counter->is_object()) {
      return refusal(missing_or_wrong(item, counter), where + "." + key + " missing or not an object");
    }
    if (auto current = required_count(*counter, "current", *out); !current.ok()) return within(where + "." + key + ": ", current.failure());
  }
  if (auto pauses = required_count(item, "pauses", tag.pauses); !pauses.ok()) return within(where + ": ", pauses.failure());
  if (!optional_seconds(item, "last_pause", tag.last_pause_seconds) || !optional_seconds(item, "last_resume", tag.last_resume_seconds)) {
    return refusal(watch_errc::invalid_value, where + ": last_pause or last_resume has no seconds");
  }
  return tag;
}

result<steplog_alert, watch_errc> parse_alert(const json& item, std::size_t index) {
  std::string where = "alerts[" + std::to_string(index) + "]";
  if (!item.is_object()) return refusal(watch_errc::wrong_type, where + " is not an object");
  auto kind = item.find("kind");
  auto text = item.find("message");
  if (kind == item.end() || !kind->is_string() || kind->get_ref<const std::string&>().empty()) {
    watch_errc code = kind != item.end() && kind->is_string() ? watch_errc::invalid_value : missing_or_wrong(item, kind);
    return refusal(code, where + ": 'kind' missing or not a string");
  }
  if (text == item.end() || !text->is_string()) return refusal(missing_or_wrong(item, text), where + ": 'message' missing or not a string");
  steplog_alert alert;
  alert.kind = kind->get<std::string>();
  alert.message = text->get<std::string>();
  // bytes_per_step is a leak's growth: never negative.
  for (line_check check : {required_count(item, "rank", alert.rank), optional_count(item, "since_step", alert.since_step),
                           optional_count(item, "bytes_per_step", alert.bytes_per_step), optional_text(item, "site", alert.site),
                           optional_text(item, "snapshot", alert.snapshot)}) {
    if (!check.ok()) return within(where + ": ", check.failure());
  }
  auto cleared = item.find("cleared");
  if (cleared != item.end() && !cleared->is_null()) {
    if (!cleared->is_boolean()) return refusal(watch_errc::wrong_type, where + ": 'cleared' is not true or false");
    alert.cleared = cleared->get<bool>();
  }
  return alert;
}

}  // namespace

result<steplog_record, watch_errc> parse_steplog_line(std::string_view line, const steplog_line_limits& limits) {
  json document = json::parse(line.begin(), line.end(), nullptr, false);
  if (document.is_discarded()) return refusal(watch_errc::not_json, "not JSON");
  if (!document.is_object()) return refusal(watch_errc::not_an_object, "not a JSON object");
  auto schema = document.find("schema");
  if (schema == document.end() || !schema->is_string()) {
    return refusal(watch_errc::not_a_steplog_line, "no 'schema' key: not a StepMonitor line");
  }
  if (schema->get_ref<const std::string&>() != steplog_schema) {
    return refusal(watch_errc::unknown_schema, "schema '" + schema->get<std::string>().substr(0, 40) + "' is not " + std::string(steplog_schema));
  }
  steplog_record record;
  auto time = document.find("time");
  if (time == document.end() || !time->is_number()) return refusal(missing_or_wrong(document, time), "'time' missing or not a number");
  record.time = time->get<double>();
  auto seconds = document.find("step_seconds");
  if (seconds != document.end() && !seconds->is_null()) {
    if (!seconds->is_number()) return refusal(watch_errc::wrong_type, "'step_seconds' is not a number");
    record.step_seconds = seconds->get<double>();
  }
  // In the order the keys are checked, so the first wrong one is the one named.
  for (auto [key, out] : {std::pair{"step", &record.step}, std::pair{"rank", &record.rank}, std::pair{"world_size", &record.world_size},
                          std::pair{"device", &record.device}, std::pair{"allocated", &record.allocated},
                          std::pair{"reserved", &record.reserved}, std::pair{"active", &record.active},
                          std::pair{"inactive_split", &record.inactive_split}, std::pair{"step_peak_allocated", &record.step_peak_allocated}}) {
    if (auto check = required_count(document, key, *out); !check.ok()) return check.failure();
  }
  if (auto check = optional_count(document, "step_peak_reserved", record.step_peak_reserved); !check.ok()) return check.failure();
  for (auto [key, out] : {std::pair{"allocations", &record.allocations}, std::pair{"num_alloc_retries", &record.num_alloc_retries},
                          std::pair{"num_ooms", &record.num_ooms}, std::pair{"device_free", &record.device_free},
                          std::pair{"device_total", &record.device_total}}) {
    if (auto check = required_count(document, key, *out); !check.ok()) return check.failure();
  }
  if (auto check = optional_count(document, "limit", record.limit); !check.ok()) return check.failure();
  if (record.world_size < 1) return refusal(watch_errc::invalid_value, "'world_size' is 0");
  auto per_step = document.find("peak_is_per_step");
  if (per_step != document.end() && !per_step->is_null()) {
    if (!per_step->is_boolean()) return refusal(watch_errc::wrong_type, "'peak_is_per_step' is not true or false");
    record.peak_is_per_step = per_step->get<bool>();
  }
  auto alerts = document.find("alerts");
  if (alerts == document.end() || !alerts->is_array()) return refusal(missing_or_wrong(document, alerts), "'alerts' missing or not an array");
  for (std::size_t i = 0; i < alerts->size(); ++i) {
    auto alert = parse_alert((*alerts)[i], i);
    if (!alert.ok()) return alert.failure();
    record.alerts.push_back(std::move(alert).value());
  }
  auto tags = document.find("runtime_tags");
  if (tags != document.end() && !tags->is_null()) {
    if (!tags->is_array()) return refusal(watch_errc::wrong_type, "'runtime_tags' is not an array");
    for (std::size_t i = 0; i < tags->size(); ++i) {
      auto tag = parse_runtime_tag((*tags)[i], i);
      if (!tag.ok()) return tag.failure();
      if (record.runtime_tags.size() < limits.max_runtime_tags) {
        record.runtime_tags.push_back(std::move(tag).value());
      } else {
        ++record.runtime_tags_left_out;
      }
    }
  }
  return record;
}

}  // namespace rlmem
