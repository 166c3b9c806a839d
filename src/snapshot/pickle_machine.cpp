// SPDX-License-Identifier: MIT
// The restricted pickle machine's opcodes: a value stack, a mark stack and a memo, nothing
// executable. Trace entries may take the shortcut in trace_entry_shortcut.cpp.

#include "pickle_machine_impl.hpp"

#include <bit>
#include <cstdio>
#include <string>

namespace rlmem::detail {

bool pickle_machine::run(value& root, const std::function<void()>& on_progress) {
  bool protocol_seen = false;
  for (;;) {
    if (--until_poll_ == 0 && !poll(on_progress)) return false;
    opcode_offset_ = in_.offset();
    if (!in_.ensure(1)) {
      if (in_.failure().code != errc::ok) {
        failure_ = in_.failure();
        return false;
      }
      return fail(errc::truncated, "input ends before STOP", opcode_offset_);
    }
    current_ = std::to_integer<unsigned char>(*in_.cursor());
    in_.advance(1);
    if (!protocol_seen && current_ != PROTO) return fail_here(errc::unknown_format, "a pickle starts with PROTO");
    const std::byte* at = nullptr;
    switch (current_) {
      case PROTO: {
        if (!(at = argument(1))) return false;
        unsigned version = std::to_integer<unsigned>(*at);
        if (version < 2 || version > 5) return fail_here(errc::unsupported_protocol, "protocol " + std::to_string(version));
        protocol_seen = true;
        break;
      }
      case FRAME:
        if (!argument(8)) return false;  // framing only groups opcodes; nothing to do
        break;
      case STOP: {
        if (!poll(on_progress) || !need(1)) return false;
        root = stack_.back();
        if (!builder_.consume(root, failure_)) return builder_failed();
        if (!in_.at_end()) {
          if (in_.failure().code != errc::ok) {
            failure_ = in_.failure();
            return false;
          }
          return fail(errc::trailing_data, "bytes follow STOP", in_.offset());
        }
        return true;
      }
      case MARK:
        if (marks_.size() >= limits_.max_depth) return fail_here(errc::limit_depth, std::to_string(marks_.size()) + " nested MARKs");
        marks_.push_back(stack_.size());
        break;
      case POP:
        if (stack_.size() > frame_base()) {
          stack_.pop_back();
        } else {
          std::size_t mark = 0;
          if (!pop_mark(mark)) return false;
        }
        break;
      case POP_MARK: {
        std::size_t mark = 0;
        if (!pop_mark(mark)) return false;
        stack_.resize(mark);
        break;
      }
      case DUP:
        if (!need(1)) return false;
        builder_.note_copied(stack_.back());
        stack_.push_back(stack_.back());
        break;
      case NONE: stack_.push_back(value::make(vkind::none, 0)); break;
      case NEWTRUE: stack_.push_back(value::make(vkind::boolean, 1)); break;
      case NEWFALSE: stack_.push_back(value::make(vkind::boolean, 0)); break;
      case BININT1:
        if (!(at = argument(1))) return false;
        stack_.push_back(builder_.make_integer(std::to_integer<std::uint8_t>(*at)));
        break;
      case BININT2:
        if (!(at = argument(2))) return false;
        stack_.push_back(builder_.make_integer(load_le<std::uint16_t>(at)));
        break;
      case BININT:
        if (!(at = argument(4))) return false;
        stack_.push_back(builder_.make_integer(load_le<std::int32_t>(at)));
        break;
      case LONG1:
        if (!(at = argument(1))) return false;
        if (!push_long(std::to_integer<std::size_t>(*at))) return false;
        break;
      case LONG4: {
        if (!(at = argument(4))) return false;
        std::int32_t width = load_le<std::int32_t>(at);
        if (width < 0) return fail_here(errc::invalid_value, "negative LONG4 length");
        if (!push_long(static_cast<std::size_t>(width))) return false;
        break;
      }
      case BINFLOAT: {
        if (!(at = argument(8))) return false;
        // BINFLOAT is big-endian.
        std::uint64_t raw = 0;
        for (int i = 0; i < 8; ++i) raw = (raw << 8) | std::to_integer<std::uint64_t>(at[i]);
        stack_.push_back(builder_.make_real(std::bit_cast<double>(raw)));
        break;
      }
      case SHORT_BINUNICODE:
      case SHORT_BINBYTES:
      case SHORT_BINSTRING:
        if (!(at = argument(1))) return false;
        if (!push_string(std::to_integer<std::size_t>(*at), current_ == SHORT_BINBYTES)) return false;
        if (!memoize_if_next()) return false;
        break;
      case BINUNICODE:
      case BINBYTES:
        if (!(at = argument(4))) return false;
        if (!push_string(load_le<std::uint32_t>(at), current_ == BINBYTES)) return false;
        if (!memoize_if_next()) return false;
        break;
      case BINSTRING: {
        if (!(at = argument(4))) return false;
        std::int32_t length = load_le<std::int32_t>(at);
        if (length < 0) return fail_here(errc::invalid_value, "negative BINSTRING length");
        if (!push_string(static_cast<std::size_t>(length), false)) return false;
        break;
      }
      case BINUNICODE8:
      case BINBYTES8:
      case BYTEARRAY8: {
        if (!(at = argument(8))) return false;
        std::uint64_t length = load_le<std::uint64_t>(at);
        if (length > limits_.max_string_bytes) return fail_here(errc::limit_string_bytes, std::to_string(length) + " bytes");
        if (!push_string(static_cast<std::size_t>(length), current_ != BINUNICODE8)) return false;
        break;
      }
      case EMPTY_LIST:
        stack_.push_back(builder_.new_container(container_type::list));
        if (!memoize_if_next()) return false;
        break;
      case EMPTY_DICT:
        if (shortcut_enabled_) {
          const std::uint64_t* note = in_.notes().empty() ? nullptr : note_at(opcode_offset_);
          shortcut outcome = note != nullptr ? read_noted_entry(note) : read_trace_entry();
          if (outcome == shortcut::failed) return false;
          if (outcome == shortcut::taken) break;
        }
        stack_.push_back(builder_.new_container(container_type::dict));
        if (!memoize_if_next()) return false;
        break;
      case EMPTY_SET: stack_.push_back(builder_.new_container(container_type::set)); break;
      case EMPTY_TUPLE: stack_.push_back(builder_.make_filled(container_type::tuple, {})); break;
      case TUPLE1: if (!make_tuple(1)) return false; break;
      case TUPLE2: if (!make_tuple(2)) return false; break;
      case TUPLE3: if (!make_tuple(3)) return false; break;
      case TUPLE: if (!fill_from_mark(container_type::tuple)) return false; break;
      case LIST: if (!fill_from_mark(container_type::list)) return false; break;
      case DICT: if (!fill_from_mark(container_type::dict)) return false; break;
      case FROZENSET: if (!fill_from_mark(container_type::set)) return false; break;
      case APPEND: if (!extend_top(1)) return false; break;
      case SETITEM: if (!extend_top(2)) return false; break;
      case APPENDS:
      case ADDITEMS:
        if (!extend_from_mark(false)) return false;
        break;
      case SETITEMS: if (!extend_from_mark(true)) return false; break;
      case MEMOIZE: if (!memo_put(memo_.size() + sparse_memo_.size())) return false; break;
      case BINPUT:
        if (!(at = argument(1))) return false;
        if (!memo_put(std::to_integer<std::uint64_t>(*at))) return false;
        break;
      case LONG_BINPUT:
        if (!(at = argument(4))) return false;
        if (!memo_put(load_le<std::uint32_t>(at))) return false;
        break;
      case BINGET:
        if (!(at = argument(1))) return false;
        if (!memo_get(std::to_integer<std::uint64_t>(*at))) return false;
        break;
      case LONG_BINGET:
        // Frame lists are long runs of LONG_BINGET: stay in this loop while they last.
        do {
          if (!(at = argument(4))) return false;
          if (!memo_get(load_le<std::uint32_t>(at))) return false;
        } while (take_next(LONG_BINGET));
        break;
      case GLOBAL: case STACK_GLOBAL: case REDUCE: case BUILD: case INST: case OBJ: case NEWOBJ:
      case NEWOBJ_EX: case EXT1: case EXT2: case EXT4: case PERSID: case BINPERSID:
        return fail_here(errc::forbidden_opcode,
                         std::string(opcode_name(current_)) + " would import or call code; refused");
      case FLOAT: case INT: case LONG: case STRING: case UNICODE: case GET: case PUT:
        return fail_here(errc::unsupported_opcode, std::string(opcode_name(current_)) + " (a protocol 0 text opcode)");
      case NEXT_BUFFER: case READONLY_BUFFER:
        return fail_here(errc::unsupported_opcode, std::string(opcode_name(current_)) + " (out-of-band buffer)");
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", current_);
        return fail_here(errc::invalid_opcode, std::string("byte ") + hex);
      }
    }
  }
}
std::string_view opcode_name(unsigned char code) noexcept {
  switch (code) {
    case MARK: return "MARK"; case STOP: return "STOP"; case POP: return "POP"; case POP_MARK: return "POP_MARK";
    case DUP: return "DUP"; case FLOAT: return "FLOAT"; case INT: return "INT"; case BININT: return "BININT";
    case BININT1: return "BININT1"; case LONG: return "LONG"; case BININT2: return "BININT2"; case NONE: return "NONE";
    case PERSID: return "PERSID"; case BINPERSID: return "BINPERSID"; case REDUCE: return "REDUCE";
    case STRING: return "STRING"; case BINSTRING: return "BINSTRING"; case SHORT_BINSTRING: return "SHORT_BINSTRING";
    case UNICODE: return "UNICODE"; case BINUNICODE: return "BINUNICODE"; case APPEND: return "APPEND";
    case BUILD: return "BUILD"; case GLOBAL: return "GLOBAL"; case DICT: return "DICT"; case EMPTY_DICT: return "EMPTY_DICT";
    case APPENDS: return "APPENDS"; case GET: return "GET"; case BINGET: return "BINGET"; case INST: return "INST";
    case LONG_BINGET: return "LONG_BINGET"; case LIST: return "LIST"; case EMPTY_LIST: return "EMPTY_LIST";
    case OBJ: return "OBJ"; case PUT: return "PUT"; case BINPUT: return "BINPUT"; case LONG_BINPUT: return "LONG_BINPUT";
    case SETITEM: return "SETITEM"; case TUPLE: return "TUPLE"; case EMPTY_TUPLE: return "EMPTY_TUPLE";
    case SETITEMS: return "SETITEMS"; case BINFLOAT: return "BINFLOAT"; case PROTO: return "PROTO";
    case NEWOBJ: return "NEWOBJ"; case EXT1: return "EXT1"; case EXT2: return "EXT2"; case EXT4: return "EXT4";
    case TUPLE1: return "TUPLE1"; case TUPLE2: return "TUPLE2"; case TUPLE3: return "TUPLE3";
    case NEWTRUE: return "NEWTRUE"; case NEWFALSE: return "NEWFALSE"; case LONG1: return "LONG1"; case LONG4: return "LONG4";
    case BINBYTES: return "BINBYTES"; case SHORT_BINBYTES: return "SHORT_BINBYTES";
    case SHORT_BINUNICODE: return "SHORT_BINUNICODE"; case BINUNICODE8: return "BINUNICODE8";
    case BINBYTES8: return "BINBYTES8"; case EMPTY_SET: return "EMPTY_SET"; case ADDITEMS: return "ADDITEMS";
    case FROZENSET: return "FROZENSET"; case NEWOBJ_EX: return "NEWOBJ_EX"; case STACK_GLOBAL: return "STACK_GLOBAL";
    case MEMOIZE: return "MEMOIZE"; case FRAME: return "FRAME"; case BYTEARRAY8: return "BYTEARRAY8";
    case NEXT_BUFFER: return "NEXT_BUFFER"; case READONLY_BUFFER: return "READONLY_BUFFER";
    default: return {};
  }
}

bool run_pickle(input_window& input, const read_limits& limits, snapshot_builder& builder, value& root,
                error& failure, const std::function<void()>& on_progress, std::uint64_t size_hint,
                bool trace_entry_shortcut, std::uint64_t prefault_from_bytes) {
  builder.reserve_for_input(size_hint);
  pickle_machine vm(input, limits, builder, failure, size_hint, trace_entry_shortcut, size_hint >= prefault_from_bytes);
  return vm.run(root, on_progress);
}

}  // namespace rlmem::detail
