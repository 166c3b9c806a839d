// SPDX-License-Identifier: MIT
// JSON or YAML text into one JSON value within limits (size, depth, values); never throws out.

#include "config_document.hpp"
#include "json_nesting.hpp"
#include "plan_refusal.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <new>

namespace rlmem::detail {

namespace {

using json = nlohmann::json;
using json_result = result<json, plan_errc>;

// Counts a parsed JSON document's values and keys against the limit (the depth was checked on the text).
bool json_within_nodes(const json& value, std::uint64_t& nodes, std::uint64_t max_nodes) {
  if (++nodes > max_nodes) return false;
  if (value.is_object() || value.is_array()) {
    for (const auto& [key, child] : value.items()) {
      if (value.is_object() && ++nodes > max_nodes) return false;
      if (!json_within_nodes(child, nodes, max_nodes)) return false;
    }
  }
  return true;
}

bool one_of(std::string_view text, std::initializer_list<std::string_view> words) {
  return std::find(words.begin(), words.end(), text) != words.end();
}

// A plain (unquoted) YAML scalar typed as PyYAML (TRL's recipes) and OmegaConf (verl) type it.
json typed_scalar(const std::string& text) {
  if (one_of(text, {"", "~", "null", "Null", "NULL"})) return nullptr;
  if (one_of(text, {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"})) return true;
  if (one_of(text, {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"})) return false;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  const char* digits = *begin == '+' ? begin + 1 : begin;
  std::int64_t integer = 0;
  if (auto [stop, error] = std::from_chars(digits, end, integer); error == std::errc() && stop == end) return integer;
  double real = 0;
  const bool has_digit = std::any_of(digits, end, [](char c) { return c >= '0' && c <= '9'; });
  if (auto [stop, error] = std::from_chars(digits, end, real, std::chars_format::general);
      has_digit && error == std::errc() && stop == end) {
    return real;
  }
  return text;
}

class yaml_converter {
 public:
  explicit yaml_converter(const trainer_config_limits& limits) : limits_(limits) {}

  /// The refusal that stopped convert(). Precondition: convert() returned false.
  const plan_error& failure() const { return failure_; }

  bool convert(const YAML::Node& node, json& out, std::uint32_t depth) {
    // Aliases share one node in yaml-cpp; here each expands, so a "billion laughs" file meets the count.
    if (++nodes_ > limits_.max_nodes) {
      return fail(plan_errc::limit_exceeded, fmt::format("holds more than {} values (or aliases that expand to as many)", limits_.max_nodes));
    }
    if (depth > limits_.max_depth) return fail(plan_errc::limit_exceeded, fmt::format("nests deeper than {} levels", limits_.max_depth));
    switch (node.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null: out = nullptr; return true;
      case YAML::NodeType::Scalar:
        // yaml-cpp tags a quoted scalar "!" and a plain one "?"; an explicit !!str stays text too.
        out = node.Tag() == "?" ? typed_scalar(node.Scalar()) : json(node.Scalar());
        return true;
      case YAML::NodeType::Sequence:
        out = json::array();
        for (const YAML::Node& item : node) {
          json converted;
          if (!convert(item, converted, depth + 1)) return false;
          out.push_back(std::move(converted));
        }
        return true;
      case YAML::NodeType::Map:
        out = json::object();
        for (const auto& entry : node) {
          if (!entry.first.IsScalar()) return fail(plan_errc::invalid_field, "has a key that is not a plain value (a list or a mapping as a key)");
          json converted;
          if (!convert(entry.second, converted, depth + 1)) return false;
          out[entry.first.Scalar()] = std::move(converted);
        }
        return true;
    }
    return fail(plan_errc::not_yaml, "has a YAML node of an unknown kind");
  }

 private:
  bool fail(plan_errc code, std::string sentence) {
    failure_ = refuse(code, sentence);
    return false;
  }

  const trainer_config_limits& limits_;
  plan_error failure_;
  std::uint64_t nodes_ = 0;
};

json_result parse_json(std::string_view text, const trainer_config_limits& limits) {
  if (json_nests_deeper(text, limits.max_depth)) {
    return refuse(plan_errc::limit_exceeded, fmt::format("nests deeper than {} levels", limits.max_depth));
  }
  json document;
  try {
    document = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& failure) {
    return refuse(plan_errc::not_json, fmt::format("is not JSON (byte {})", failure.byte));
  } catch (const json::exception& failure) {
    return refuse(plan_errc::not_json, fmt::format("is not JSON we can read ({})", failure.what()));
  }
  std::uint64_t nodes = 0;
  if (!json_within_nodes(document, nodes, limits.max_nodes)) {
    return refuse(plan_errc::limit_exceeded, fmt::format("holds more than {} values", limits.max_nodes));
  }
  return document;
}

json_result parse_yaml(std::string_view text, const trainer_config_limits& limits) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& failure) {
    // yaml-cpp's own depth guard (DeepRecursion) is a ParserException too; its mark is 0-based.
    return refuse(plan_errc::not_yaml, fmt::format("is not YAML (line {}: {})", failure.mark.line + 1, failure.msg.substr(0, 80)));
  } catch (const std::bad_alloc&) {
    return refuse(plan_errc::limit_exceeded, "is not YAML we can hold in memory");
  }
  try {
    json document;
    yaml_converter converter(limits);
    if (!converter.convert(root, document, 0)) return converter.failure();
    return document;
  } catch (const YAML::Exception& failure) {  // e.g. an invalid node reached through an alias
    return refuse(plan_errc::not_yaml, fmt::format("is not YAML we can read ({})", failure.msg.substr(0, 80)));
  } catch (const json::exception& failure) {  // a key or value that is not UTF-8 reaches nlohmann
    return refuse(plan_errc::not_yaml, fmt::format("is not YAML we can read ({})", failure.what()));
  }
}

}  // namespace

result<config_document, plan_errc> parse_config_document(std::string_view text, const trainer_config_limits& limits) {
  if (text.size() > limits.max_bytes) {
    return refuse(plan_errc::limit_exceeded, fmt::format("is larger than {} bytes; not a trainer config", limits.max_bytes));
  }
  if (text.find('\0') != std::string_view::npos) return refuse(plan_errc::not_a_trainer_config, "is binary, not a JSON or YAML config");
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  const document_syntax syntax = first != std::string_view::npos && text[first] == '{' ? document_syntax::json : document_syntax::yaml;
  json_result settings = syntax == document_syntax::json ? parse_json(text, limits) : parse_yaml(text, limits);
  if (!settings.ok()) return settings.failure();
  return config_document{std::move(settings).value(), syntax};
}

}  // namespace rlmem::detail
