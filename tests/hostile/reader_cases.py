# SPDX-License-Identifier: MIT
"""Hostile inputs for the snapshot reader (issue 10, items 2 and 3): shared structure that
expands when copied, decompression and stack bombs, sparse and non-regular files, and sizes no
allocator can produce. Every pickle is written opcode by opcode, at the size the issue names."""
import os
import struct
import subprocess
import threading

from run import Case

PROTO4, STOP = b"\x80\x04", b"."
EMPTY_DICT, EMPTY_LIST, MARK, SETITEMS, APPENDS, APPEND = b"}", b"]", b"(", b"u", b"e", b"a"


class Pickle:
    """Opcodes appended in order; memoize() numbers memo entries as Python's pickler does."""

    def __init__(self):
        self.out = bytearray(PROTO4)
        self.memo_count = 0

    def op(self, data: bytes) -> "Pickle":
        self.out += data
        return self

    def memoize(self) -> int:
        self.out += b"\x94"
        self.memo_count += 1
        return self.memo_count - 1

    def text(self, value: str) -> "Pickle":  # SHORT_BINUNICODE
        data = value.encode()
        return self.op(b"\x8c" + bytes([len(data)]) + data)

    def get(self, index: int) -> "Pickle":  # BINGET, or LONG_BINGET past 255
        return self.op(b"h" + bytes([index]) if index < 256 else b"j" + struct.pack("<I", index))

    def integer(self, number: int) -> "Pickle":  # LONG1 with a sign byte: any 64-bit value
        return self.op(b"\x8a\x09" + number.to_bytes(9, "little", signed=True))

    def done(self) -> bytes:
        return bytes(self.out + STOP)


def event_fields(p: Pickle, size: int, action: str = "alloc") -> Pickle:
    p.text("action").text(action).text("addr").integer(4096).text("size").integer(size)
    return p.text("stream").integer(0).text("frames").op(EMPTY_LIST)


def one_event_snapshot(size: int, action: str = "alloc") -> bytes:
    """{'segments': [], 'device_traces': [[{action, addr, size, stream, frames}]]}"""
    p = Pickle().op(EMPTY_DICT + MARK).text("segments").op(EMPTY_LIST).text("device_traces")
    p.op(EMPTY_LIST + MARK + EMPTY_LIST + MARK + EMPTY_DICT + MARK)
    event_fields(p, size, action)
    return p.op(SETITEMS + APPENDS + APPENDS + SETITEMS).done()


def one_segment_snapshot(total_size: int, block_size: int) -> bytes:
    p = Pickle().op(EMPTY_DICT + MARK).text("segments").op(EMPTY_LIST + MARK + EMPTY_DICT + MARK)
    p.text("device").integer(0).text("address").integer(1 << 40).text("total_size").integer(total_size)
    p.text("blocks").op(EMPTY_LIST + MARK + EMPTY_DICT + MARK)
    p.text("address").integer(1 << 40).text("size").integer(block_size).text("state").text("active_allocated")
    p.op(SETITEMS + APPENDS + SETITEMS + APPENDS).text("device_traces").op(EMPTY_LIST)
    return p.op(SETITEMS).done()


# 1a. allocator_settings as a dict DAG: level i is {'a': level i-1, 'b': level i-1}, so copying
# it path by path makes 2**levels leaves. 30 levels: about 400 bytes.
def settings_dag(levels: int = 30) -> bytes:
    p = Pickle().op(EMPTY_DICT + MARK).text("segments").op(EMPTY_LIST).text("device_traces").op(EMPTY_LIST)
    p.text("allocator_settings")
    p.op(EMPTY_DICT)
    below = p.memoize()
    p.op(MARK).text("k").op(b"K\x01" + SETITEMS)
    for _ in range(levels):
        p.op(b"0" + EMPTY_DICT)  # POP the level below: the memo keeps it
        this = p.memoize()
        p.op(MARK).text("a").get(below).text("b").get(below).op(SETITEMS)
        below = this
    return p.op(SETITEMS).done()


# 1b. device_traces: one list referenced `devices` times, holding one event referenced `events`
# times (40 KB: 10**8 trace entries, 4.7 GB, when copied per device).
def shared_traces(devices: int = 10000, events: int = 10000) -> bytes:
    p = Pickle().op(EMPTY_DICT + MARK).text("segments").op(EMPTY_LIST).text("device_traces")
    p.op(EMPTY_LIST + MARK + EMPTY_LIST)
    trace = p.memoize()
    p.op(MARK + EMPTY_DICT + MARK)
    event_fields(p, 512)
    p.op(SETITEMS)
    event = p.memoize()
    for _ in range(events - 1):
        p.get(event)
    p.op(APPENDS)
    for _ in range(devices - 1):
        p.get(trace)
    return p.op(APPENDS + SETITEMS).done()


# 1c. one block list shared by many segments (38 KB in the issue: a hang).
def shared_block_lists(segments: int = 400, blocks: int = 4000) -> bytes:
    p = Pickle().op(EMPTY_DICT + MARK).text("device_traces").op(EMPTY_LIST).text("segments")
    p.op(EMPTY_LIST + MARK)
    # The first segment owns the list; its blocks are one block referenced `blocks` times,
    # written first as a separate list so that the segment's blocks are not a range.
    p.op(EMPTY_DICT + MARK).text("address").integer(0).text("size").integer(512).text("state")
    p.text("active_allocated").op(SETITEMS)
    block = p.memoize()
    p.op(b"0" + EMPTY_LIST)  # POP: the memo keeps the block
    blocks_list = p.memoize()
    p.op(MARK)
    for _ in range(blocks):
        p.get(block)
    p.op(APPENDS + b"0")
    for index in range(segments):
        p.op(EMPTY_DICT + MARK).text("address").integer(index << 30).text("total_size").integer(512 * blocks)
        p.text("blocks").get(blocks_list).op(SETITEMS)
    return p.op(APPENDS + SETITEMS).done()


# 2. Stack and container bombs behind zstd: 1 GB of EMPTY_LIST (about 33 KB compressed), and
# 1 GB of empty lists appended into one list.
def zstd_rle_frame(prefix: bytes, fill: bytes, total: int) -> bytes:
    """A zstd frame: `prefix` as a raw block, then `fill` (1 byte) repeated to `total` bytes as
    RLE blocks of 128 KiB, 4 bytes each: 100 GB costs 3 MB and no time to make."""
    def header(last: bool, kind: int, size: int) -> bytes:
        return (int(last) | (kind << 1) | (size << 3)).to_bytes(3, "little")

    out = bytearray(b"\x28\xb5\x2f\xfd\x00" + bytes([7 << 3]))  # no content size, 128 KiB window
    out += header(False, 0, len(prefix)) + prefix
    block = 128 << 10
    full, rest = divmod(total, block)
    out += (header(False, 1, block) + fill) * (full - (0 if rest else 1))
    out += header(True, 1, rest or block) + fill
    return bytes(out)


def zstd_strings_of_zeros(count: int = 400, length: int = 1 << 28) -> bytes:
    """A pickle header, then `count` BINBYTES8 strings of `length` zero bytes, each POPped: 100 GB
    of valid pickle in one zstd frame of raw blocks (the opcodes) and RLE blocks (the zeros)."""
    def header(last: bool, kind: int, size: int) -> bytes:
        return (int(last) | (kind << 1) | (size << 3)).to_bytes(3, "little")

    block = 128 << 10
    zeros = (header(False, 1, block) + b"\x00") * (length // block)
    out = bytearray(b"\x28\xb5\x2f\xfd\x00" + bytes([7 << 3]))
    out += header(False, 0, 2) + PROTO4
    for _ in range(count):
        opcode = b"\x8e" + struct.pack("<Q", length)
        out += header(False, 0, len(opcode)) + opcode + zeros + header(False, 0, 1) + b"0"
    return bytes(out + header(True, 0, 1) + STOP)


def repeated_zstd(prefix: bytes, unit: bytes, total: int) -> bytes:
    """`prefix` then `unit` repeated up to `total` bytes, compressed by the zstd CLI in one go
    from a 64 MiB piece repeated (zstd's long-distance matching makes the rest nearly free)."""
    piece = unit * ((64 << 20) // len(unit))
    proc = subprocess.Popen(["zstd", "-q", "-c", "--long=27", "-1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    out = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()))
    reader.start()
    proc.stdin.write(prefix)
    written = 0
    while written + len(piece) <= total:
        proc.stdin.write(piece)
        written += len(piece)
    proc.stdin.close()
    reader.join()
    proc.wait()
    return out[0]


def sparse_setup(size: int, head: bytes):
    def make(directory):
        path = directory / "sparse.pickle"
        with open(path, "wb") as f:
            f.write(head)
            f.truncate(size)
    return make


def fifo_setup(directory):
    os.mkfifo(directory / "fifo.pickle")


CASES = [
    Case("reader-memo-dag-allocator-settings", ["inspect", "--json", "{input}"], make_input=settings_dag,
         note="allocator_settings as a 30-level shared dict DAG (512 B; 2^30 leaves copied)"),
    Case("reader-shared-device-traces", ["inspect", "--json", "{input}"], make_input=shared_traces,
         note="one trace list x10^4 devices holding one event x10^4 (40 KB; 10^8 events copied)"),
    Case("reader-shared-block-lists", ["inspect", "--json", "{input}"], make_input=shared_block_lists,
         suffix=".pickle", note="one 4000-block list shared by 400 segments (~40 KB)"),
    Case("reader-zstd-empty-lists", ["inspect", "--json", "{input}"], suffix=".pickle.zst",
         make_input=lambda: zstd_rle_frame(PROTO4, EMPTY_LIST, 1 << 30),
         note="1 GiB of EMPTY_LIST in zstd (33 KB): a stack and container bomb"),
    Case("reader-zstd-appended-empty-lists", ["inspect", "--json", "{input}"], suffix=".pickle.zst",
         make_input=lambda: repeated_zstd(PROTO4 + EMPTY_LIST, EMPTY_LIST + APPEND, 1 << 30),
         note="1 GiB of ']a': empty lists appended into one list, in zstd"),
    Case("reader-zstd-100gb-zeros-after-string", ["inspect", "--json", "{input}"], suffix=".pickle.zst",
         make_input=lambda: zstd_rle_frame(PROTO4 + b"\x8e" + struct.pack("<Q", (1 << 28) - 1), b"\x00", 100 << 30),
         note="a pickle header, a 256 MiB BINBYTES8, then 100 GB of zeros (3 MB of zstd)"),
    Case("reader-zstd-100gb-of-strings", ["inspect", "--json", "{input}"], suffix=".pickle.zst",
         make_input=zstd_strings_of_zeros,
         note="400 strings of 256 MiB of zeros: 100 GB of valid pickle in 3 MB of zstd"),
    Case("reader-zstd-100gb-zeros", ["inspect", "--json", "{input}"], suffix=".pickle.zst",
         make_input=lambda: zstd_rle_frame(b"", b"\x00", 100 << 30),
         note="100 GB of zeros in zstd (3 MB)"),
    Case("reader-sparse-100gb", ["inspect", "--json", "{dir}/sparse.pickle"],
         setup=sparse_setup(100 << 30, PROTO4 + EMPTY_LIST), note="a sparse 100 GB file: a pickle header, then holes"),
    Case("reader-fifo-without-writer", ["inspect", "--json", "{dir}/fifo.pickle"], setup=fifo_setup, exits=(2,),
         note="a FIFO nobody writes to"),
    Case("reader-dev-zero", ["inspect", "--json", "/dev/zero"], exits=(2,), note="/dev/zero as the snapshot"),
    Case("reader-oom-size-2^64-1", ["inspect", "--json", "{input}"], exits=(2,),
         make_input=lambda: one_event_snapshot((1 << 64) - 1, "oom"), note="an oom event of 2^64-1 bytes"),
    Case("reader-size-2^63", ["inspect", "--json", "{input}"], exits=(2,),
         make_input=lambda: one_event_snapshot(1 << 63), note="an alloc of 2^63 bytes"),
    Case("reader-negative-size", ["inspect", "--json", "{input}"], exits=(2,),
         make_input=lambda: one_event_snapshot(-4096), note="an alloc of -4096 bytes"),
    Case("reader-negative-segment-size", ["inspect", "--json", "{input}"], exits=(2,),
         make_input=lambda: one_segment_snapshot(-(1 << 21), 512), note="a segment of -2 MiB"),
    Case("reader-36tib-request-is-data", ["inspect", "--json", "{input}"], exits=(0,),
         make_input=lambda: one_event_snapshot(36 << 40, "oom"), note="an oom of 36 TiB: huge but real; reads"),
]
