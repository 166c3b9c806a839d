#!/usr/bin/env python3
"""layers_are_respected.py can fail: it runs over small trees laid out as a source folder and its
Makefile build (DependInfo.cmake, the compiler's .o.d files with paths as ccache's base_dir
writes them, relative to the target's folder), one upward dependency each, and must name it.

usage: layers_are_respected_test.py   (exit 0 when every case came out as expected)
"""

import pathlib
import subprocess
import sys
import tempfile

CHECKER = pathlib.Path(__file__).with_name("layers_are_respected.py")
PARTS = ["base", "device", "policy", "runtime", "step_rules", "snapshot", "model", "inspect", "replay",
         "plan", "watch", "report", "cli", "capi"]


def make_tree(root, objects, links=None, extra_parts=()):
    """objects: {(part, source name): [headers, relative to the source folder]}; links: {part:
    [linked parts]}. Each part has one target, rlmem_<part>, in build/src/<part>."""
    source = root / "source"
    build = source / "build"
    for part in list(PARTS) + list(extra_parts):
        (source / "src" / part).mkdir(parents=True, exist_ok=True)
    for part in PARTS:
        (source / "include" / "rlmem" / part).mkdir(parents=True, exist_ok=True)
    by_part = {}
    for (part, name), headers in objects.items():
        by_part.setdefault(part, []).append((name, headers))
    for part in set(by_part) | set(links or {}):
        target_dir = build / "src" / part / "CMakeFiles" / f"rlmem_{part}.dir"
        target_dir.mkdir(parents=True, exist_ok=True)
        rows = []
        for name, headers in by_part.get(part, []):
            source_file = source / "src" / part / name
            source_file.write_text("")
            for header in headers:
                (source / header).parent.mkdir(parents=True, exist_ok=True)
                (source / header).write_text("")
            object_file = f"src/{part}/CMakeFiles/rlmem_{part}.dir/{name}.o"
            written = " \\\n ".join(["../../../src/" + part + "/" + name, "/usr/include/stdc-predef.h"] +
                                    ["../../../" + header for header in headers])
            (build / (object_file + ".d")).write_text(f"{object_file}: \\\n {written}\n")
            rows.append(f'  "{source_file}" "{object_file}" "gcc" "{object_file}.d"')
        linked = [f'  "{build}/src/{other}/CMakeFiles/rlmem_{other}.dir/DependInfo.cmake"'
                  for other in (links or {}).get(part, [])]
        (target_dir / "DependInfo.cmake").write_text(
            "set(CMAKE_DEPENDS_DEPENDENCY_FILES\n" + "\n".join(rows) + "\n  )\n\n"
            "set(CMAKE_TARGET_LINKED_INFO_FILES\n" + "\n".join(linked) + "\n  )\n")
    return source, build


def check(objects, links=None, extra_parts=()):
    with tempfile.TemporaryDirectory() as folder:
        source, build = make_tree(pathlib.Path(folder), objects, links, extra_parts)
        run = subprocess.run([sys.executable, str(CHECKER), str(source), str(build)],
                             capture_output=True, text=True)
        return run.returncode, run.stdout


# A tree that keeps the layers: the runtime over the policy over the device, links included.
GOOD = {
    ("runtime", "runtime.cpp"): ["include/rlmem/runtime/runtime.hpp", "include/rlmem/policy/rlmem_policy.hpp",
                                 "include/rlmem/policy/allocator_policy.hpp", "include/rlmem/device/device.hpp"],
    ("replay", "replay.cpp"): ["include/rlmem/replay/replay.hpp", "include/rlmem/model/trace_simulation.hpp",
                               "include/rlmem/snapshot/snapshot.hpp", "include/rlmem/base/format.hpp"],
    ("report", "html.cpp"): ["include/rlmem/report/report.hpp", "include/rlmem/inspect/views.hpp",
                             "src/report/html_page.hpp"],
}
GOOD_LINKS = {"runtime": ["policy", "device"], "replay": ["model", "snapshot", "policy", "device", "base"]}

# name -> (objects added to GOOD, links added to GOOD_LINKS, what the failure must name)
UPWARD = {
    "replay including inspect's views": (
        {("replay", "replay.cpp"): GOOD[("replay", "replay.cpp")] + ["include/rlmem/inspect/views.hpp"]}, {},
        "replay reads headers of inspect, directly or through its includes: include/rlmem/inspect/views.hpp;"),
    "plan including inspect": (
        {("plan", "phases.cpp"): ["include/rlmem/plan/plan.hpp", "include/rlmem/inspect/inspect.hpp"]}, {},
        "plan reads headers of inspect, directly or through its includes: include/rlmem/inspect/inspect.hpp;"),
    "watch including report": (
        {("watch", "advice.cpp"): ["include/rlmem/watch/watch.hpp", "include/rlmem/report/report.hpp"]}, {},
        "watch reads headers of report, directly or through its includes: include/rlmem/report/report.hpp;"),
    # runtime.hpp -> rlmem_policy.hpp -> caching_allocator.hpp: two includes deep, as before the
    # policy had its own model_block.
    "runtime including the caching allocator through the policy's header": (
        {("runtime", "runtime.cpp"): GOOD[("runtime", "runtime.cpp")] +
         ["include/rlmem/model/caching_allocator.hpp", "include/rlmem/model/allocator_settings.hpp",
          "include/rlmem/snapshot/snapshot.hpp"]}, {},
        "runtime reads headers of model, directly or through its includes: include/rlmem/model/allocator_settings.hpp, include/rlmem/model/caching_allocator.hpp;"),
    "capi reading the CLI's private header": (
        {("capi", "rlmem_c.cpp"): ["include/rlmem/rlmem.h", "src/cli/output.hpp"]}, {},
        "capi reads private files of cli, directly or through its includes: src/cli/output.hpp;"),
    "runtime linking the model": ({}, {"runtime": ["policy", "device", "model"]}, "rlmem_runtime (runtime) links rlmem_model (model)"),
}


def main():
    failures = []
    code, out = check(GOOD, GOOD_LINKS)
    if code != 0 or "3 objects of 3 targets" not in out:
        failures.append(f"a tree that keeps the layers: expected exit 0 and 3 objects checked, saw {code}: {out!r}")
    for name, (objects, links, expected) in UPWARD.items():
        code, out = check({**GOOD, **objects}, {**GOOD_LINKS, **links})
        if code != 1 or expected not in out:
            failures.append(f"{name}: expected exit 1 and {expected!r}, saw {code}: {out!r}")
    code, out = check(GOOD, GOOD_LINKS, extra_parts=["kernels"])
    if code != 1 or "src/kernels or include/rlmem/kernels is a part without a row in LAYERS" not in out:
        failures.append(f"a part without a row: expected exit 1 naming src/kernels, saw {code}: {out!r}")
    for failure in failures:
        print("FAIL " + failure)
    if not failures:
        print(f"the layer check passes a layered tree and fails each of {len(UPWARD) + 1} upward dependencies")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
