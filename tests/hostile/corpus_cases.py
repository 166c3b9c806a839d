# SPDX-License-Identifier: MIT
"""Folders of per-rank snapshots and `rlmem diff`: files are read on worker threads, where an
exception must become that file's error (never std::terminate); rank numbers come only from
torchrun-style names; the imbalance line never divides by zero."""
import os
import pickle
import shutil
from pathlib import Path

from run import Case

TESTDATA = Path(__file__).resolve().parents[2] / "testdata"
SMALL_SNAPSHOT = TESTDATA / "snapshots" / "tiny_oom_cpp_stacks.pickle"
SPARSE_BYTES = 100 << 30   # 100 GB that take no disk: os.truncate makes a hole
PICKLE_START = b"\x80\x04\x95"  # PROTO 4 and a FRAME opcode: the reader takes it for a pickle and reads on


def sparse_pickle(path: Path):
    path.write_bytes(PICKLE_START)
    os.truncate(path, SPARSE_BYTES)


def ranks_folder(case_dir: Path, *names: str) -> Path:
    folder = case_dir / "ranks"
    folder.mkdir()
    for name in names:
        shutil.copyfile(SMALL_SNAPSHOT, folder / name)
    return folder


def with_sparse_rank(case_dir: Path):
    folder = ranks_folder(case_dir, "snapshot_rank0.pickle")
    sparse_pickle(folder / "snapshot_rank1.pickle")


def sparse_pair(case_dir: Path):
    shutil.copyfile(SMALL_SNAPSHOT, case_dir / "a.pickle")
    sparse_pickle(case_dir / "b.pickle")


def with_an_empty_rank(case_dir: Path):
    folder = ranks_folder(case_dir, "snapshot_rank0.pickle")
    (folder / "snapshot_rank1.pickle").write_bytes(pickle.dumps({"segments": [], "device_traces": [[]]}, protocol=4))


CASES = [
    Case("ranks-sparse-100gb-file", ["inspect", "{dir}/ranks"], setup=with_sparse_rank, exits=(2,),
         note="a folder whose rank 1 is a sparse 100 GB file: that rank's error, not SIGABRT"),
    Case("ranks-sparse-100gb-file-json", ["inspect", "--json", "{dir}/ranks"], setup=with_sparse_rank, exits=(2,),
         note="the same, --json"),
    Case("diff-sparse-100gb-file", ["diff", "{dir}/a.pickle", "{dir}/b.pickle"], setup=sparse_pair, exits=(2,),
         note="diff against a sparse 100 GB file"),
    Case("ranks-duplicate", ["inspect", "{dir}/ranks"],
         setup=lambda d: ranks_folder(d, "snapshot_rank3.pickle", "oom_rank_3.pickle", "snapshot_rank0.pickle"),
         exits=(2,), note="two files of rank 3: refused, naming both"),
    Case("ranks-no-rank-names", ["inspect", "{dir}/ranks"],
         setup=lambda d: ranks_folder(d, "snapshot_47727.pickle", "snapshot_2024-05-01.pickle"),
         exits=(2,), note="digits but no rank mark: refused, listing the names accepted"),
    Case("ranks-zero-peak", ["inspect", "{dir}/ranks"], setup=with_an_empty_rank, exits=(0,),
         note="one rank recorded nothing (peak 0 B): the imbalance line has no ratio, no division by zero"),
]
