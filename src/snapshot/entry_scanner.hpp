// SPDX-License-Identifier: MIT
#pragma once
// Trace entries decoded ahead of the parse, on the read-ahead thread. The scanner follows the
// pickle opcode by opcode as the machine will (opcodes are self-delimiting, so both meet the
// same boundaries) and, at each EMPTY_DICT that starts an entry laid out as torch writes it,
// leaves a note: where each key and value lies and what it is. The machine then builds the
// record from the note instead of walking the bytes. A note says only what the bytes are; all
// that depends on the parse so far (memo entries, interned strings, the record) stays with the
// machine, which applies a note exactly as its byte path would read the same bytes.

#include "byte_source.hpp"

#include <cstddef>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace rlmem::detail {

/// The layout of a note, in 64-bit words:
///   [0] the stream offset of the entry's EMPTY_DICT
///   [1] bits 0-15: the entry's bytes through its SETITEMS; 16-23: items (keys and values);
///       24-31: the index of the frame list among them, or 0xff; bit 32: a MEMOIZE follows
///       the EMPTY_DICT; bit 33: the run's name follows the items; 34-63: 1 + the memo index
///       the last value that is a memo reference names, or 0 (for the parse to fetch that memo
///       entry ahead: it is often far back)
///   then one word per item, then, when the frame list is a run of memo references that
///   scan_frame_run covers whole, the run's name: the slot of entry_scanner's table of recent
///   runs (low run_slot_bits) and the serial the scanner gave those bytes there (above them).
///   Equal names mean byte-identical runs: the scanner compares the whole run before it reuses
///   a serial, and never gives a serial twice.
namespace entry_note {
inline constexpr std::size_t max_entry_bytes = 4096;  // offsets inside an entry fit in 16 bits
inline constexpr std::size_t max_items = 32;          // as the machine's shortcut
inline constexpr std::size_t max_frames = 1000;       // the pickler's APPENDS batch
inline constexpr unsigned no_frames = 0xff;
inline constexpr std::size_t max_words = 2 + max_items + 1;
inline constexpr int run_slot_bits = 10;
inline constexpr std::size_t run_slots = std::size_t{1} << run_slot_bits;
inline std::size_t run_slot(std::uint64_t name) { return static_cast<std::size_t>(name & (run_slots - 1)); }

/// An item word's top 4 bits.
enum class tag : std::uint8_t { memo_reference = 1, integer, none, true_value, false_value, string, frames };
/// How an entry's frame list is written: EMPTY_LIST (and MEMOIZE), then nothing, one memo
/// reference and APPEND, or MARK, a run of memo references and APPENDS.
enum class frames_form : std::uint8_t { empty, single, run };

inline constexpr int tag_shift = 60;
inline constexpr std::uint64_t memoized_bit = std::uint64_t{1} << 59;  // strings and frame lists
inline constexpr int form_shift = 56;                                 // frame lists
inline constexpr std::uint64_t whole_run_bit = std::uint64_t{1} << 32;  // the run's hash covers it all

inline tag tag_of(std::uint64_t item) { return static_cast<tag>(item >> tag_shift); }
/// memo_reference: the memo index. integer: 60-bit two's complement, as value's inline form.
inline std::uint64_t payload_of(std::uint64_t item) { return item & ((std::uint64_t{1} << tag_shift) - 1); }
/// string and run: where the bytes lie from the EMPTY_DICT, and how many.
inline std::size_t relative_of(std::uint64_t item) { return static_cast<std::size_t>(item & 0xffff); }
inline std::size_t length_of(std::uint64_t item) { return static_cast<std::size_t>((item >> 16) & 0xffff); }
inline frames_form form_of(std::uint64_t item) { return static_cast<frames_form>((item >> form_shift) & 3); }

inline std::size_t entry_bytes(const std::uint64_t* note) { return static_cast<std::size_t>(note[1] & 0xffff); }
inline std::size_t item_count(const std::uint64_t* note) { return static_cast<std::size_t>((note[1] >> 16) & 0xff); }
inline unsigned frames_index(const std::uint64_t* note) { return static_cast<unsigned>((note[1] >> 24) & 0xff); }
inline bool entry_memoized(const std::uint64_t* note) { return ((note[1] >> 32) & 1) != 0; }
/// 1 + the memo index of the entry's last value that is a memo reference, or 0.
inline std::uint64_t far_reference(const std::uint64_t* note) { return note[1] >> 34; }
inline constexpr std::uint64_t max_far_reference = (std::uint64_t{1} << 30) - 1;
/// Words the note takes (from its header alone).
inline std::size_t words(const std::uint64_t* note) { return 2 + item_count(note) + ((note[1] >> 33) & 1); }
}  // namespace entry_note

/// Leaves a note on each block for every trace entry that lies wholly inside it. Its state
/// (where the next opcode starts) carries from block to block, so blocks must come in order;
/// after an opcode the machine would refuse (or STOP) it notes nothing more. Memory: the notes
/// of a block, at most one word per byte of it (every item and the header take a byte or more).
class entry_scanner final : public block_scanner {
 public:
  void scan(std::span<const std::byte> data, std::uint64_t offset, block_notes& notes) noexcept override;

  /// Recent frame runs by their bytes, to name them in notes: direct-mapped by scan_frame_run's
  // hash; at most run_slots runs and 1 MiB of their bytes (all forgotten when that is full).
  struct frame_runs {
    struct slot {
      std::uint64_t serial = 0;  // 0: empty
      std::uint32_t offset = 0;
      std::uint32_t length = 0;
    };
    std::uint64_t name(std::span<const std::byte> run, std::uint64_t hash);
    std::array<slot, entry_note::run_slots> slots{};
    std::vector<std::byte> arena;
    std::uint64_t next_serial = 1;
  };

 private:
  void scan_from(const std::byte* data, std::size_t size, std::size_t position, std::uint64_t offset,
                 block_notes& notes);

  frame_runs runs_;
  std::uint64_t skip_ = 0;              // bytes of an opcode's argument still to pass over
  std::byte carry_[16] = {};            // an opcode whose header the last block cut
  std::size_t carried_ = 0;
  bool stopped_ = false;
};

}  // namespace rlmem::detail
