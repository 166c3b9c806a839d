// SPDX-License-Identifier: MIT
// Typed, bounded reads of a trainer config's dotted keys, and the record of what each became.

#include "config_settings.hpp"
#include "plan_refusal.hpp"

#include <fmt/format.h>

#include <cmath>

namespace rlmem::detail {

namespace {

const nlohmann::json* find_path(const nlohmann::json& document, std::string_view path) {
  const nlohmann::json* node = &document;
  while (true) {
    const std::size_t dot = path.find('.');
    const std::string_view part = path.substr(0, dot);
    if (!node->is_object()) return nullptr;
    auto it = node->find(std::string(part));
    if (it == node->end()) return nullptr;
    node = &*it;
    if (dot == std::string_view::npos) return node;
    path.remove_prefix(dot + 1);
  }
}

// A value in an error message, as JSON: a quoted "4" is text where a number was expected.
std::string error_text(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

}  // namespace

std::string value_text(const nlohmann::json& value) {
  std::string text = value.is_string() ? value.get<std::string>() : value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

setting settings_reader::get(std::string_view path, nlohmann::json fallback) const {
  setting result;
  result.key = std::string(path);
  const nlohmann::json* found = find_path(document_, path);
  if (found != nullptr && !found->is_null()) {
    result.value = *found;
    result.in_file = true;
    result.interpolated = found->is_string() && found->get_ref<const std::string&>().find("${") != std::string::npos;
  } else {
    result.value = std::move(fallback);
  }
  return result;
}

bool settings_reader::has(std::string_view path) const { return find_path(document_, path) != nullptr; }

bool settings_reader::fail(std::string sentence, plan_errc code) {
  if (!failed_) failure_ = refuse(code, sentence);
  failed_ = true;
  return false;
}

std::optional<std::uint64_t> settings_reader::count(const setting& value, std::uint64_t limit, std::uint64_t minimum) {
  const nlohmann::json& v = value.value;
  // 4.0 is how a YAML or JSON writer may spell an integer knob; 4.5 is not one.
  const bool whole_real = v.is_number_float() && std::isfinite(v.get<double>()) && std::floor(v.get<double>()) == v.get<double>();
  if (!(v.is_number_integer() || whole_real)) {
    fail(fmt::format("{} must be a whole number, not {}", value.key, error_text(v)));
    return std::nullopt;
  }
  const double as_real = v.get<double>();
  if (as_real < static_cast<double>(minimum) || as_real > static_cast<double>(limit)) {
    fail(fmt::format("{} = {} is outside {} to {}", value.key, value_text(v), minimum, limit),
         as_real > static_cast<double>(limit) ? plan_errc::limit_exceeded : plan_errc::invalid_field);
    return std::nullopt;
  }
  return v.is_number_integer() ? v.get<std::uint64_t>() : static_cast<std::uint64_t>(as_real);
}

std::optional<bool> settings_reader::flag(const setting& value) {
  if (!value.value.is_boolean()) {
    fail(fmt::format("{} must be true or false, not {}", value.key, error_text(value.value)));
    return std::nullopt;
  }
  return value.value.get<bool>();
}

std::optional<double> settings_reader::number(const setting& value) {
  if (!value.value.is_number()) {
    fail(fmt::format("{} must be a number, not {}", value.key, error_text(value.value)));
    return std::nullopt;
  }
  return value.value.get<double>();
}

std::optional<std::string> settings_reader::text(const setting& value) {
  if (!value.value.is_string()) {
    fail(fmt::format("{} must be text, not {}", value.key, error_text(value.value)));
    return std::nullopt;
  }
  return value.value.get<std::string>();
}

void settings_reader::map(const setting& from, std::string flag, std::string flag_value, std::string note) {
  mapped_setting entry;
  entry.key = from.key;
  entry.value = value_text(from.value);
  entry.flag = std::move(flag);
  entry.flag_value = std::move(flag_value);
  entry.note = std::move(note);
  entry.from_default = !from.in_file;
  mapping_.mapped.push_back(std::move(entry));
}

void settings_reader::ignore(const setting& from, std::string reason) {
  mapping_.ignored.push_back({from.key, value_text(from.value), std::move(reason)});
}

void settings_reader::ignore_interpolation(const setting& from) {
  ignore(from, "an OmegaConf interpolation that Hydra resolves at run time; give the value as a flag");
}

}  // namespace rlmem::detail
