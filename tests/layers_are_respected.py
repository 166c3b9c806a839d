#!/usr/bin/env python3
"""The layers, checked on what the compiler and the linker saw, not on what a source file says.

Every object of every part's target (build/src/<part>/...) has the dependency file the compiler
wrote beside it (-MD: every header it read, through any number of includes), and every target's
DependInfo.cmake names the targets it links, directly or not. Each header and each linked target
belongs to a part (include/rlmem/<part>/, src/<part>/); a part may use only itself and the parts
below it in LAYERS. So a header that includes a higher layer's header fails here for every object
that reads it, however deep the include, and a part's private headers (src/<part>/*.hpp) are its
own. The tests, fuzzers and benchmarks sit above every part and are not checked.

usage: layers_are_respected.py SOURCE_DIR BUILD_DIR   (after the build: it reads what it left)
"""

import pathlib
import re
import sys

# part -> the parts directly below it, which it may include and link; the rest of what it may use
# follows from theirs. A new part gets a row here before the test passes.
LAYERS = {
    "base": [],  # formats, files, usable cores, saturating arithmetic, enum names, the error type
    "device": ["base"],  # the device seam, under every allocator policy: base for the error model alone
    "policy": ["device"],  # allocator_policy (model_block) and the rlmem policy over the device
    "runtime": ["policy"],  # the rlmem policy running for real: the policy and the device only
    "step_rules": ["base"],  # plain arithmetic over sampled figures
    "snapshot": ["base"],  # the reader and the snapshot's records
    "model": ["snapshot", "policy"],  # torch's caching allocator, once
    "inspect": ["model", "step_rules"],
    "replay": ["model"],
    "plan": ["base"],
    "watch": ["step_rules"],
    "report": ["inspect", "replay", "plan", "watch"],
    "cli": ["report"],
    "capi": ["report", "runtime"],  # librlmem: rlmem.h and rlmem_runtime.h are its headers
}
# Headers at the top of include/rlmem/: the C ABI's, and version.h (generated into the build).
TOP_HEADERS = {"rlmem.h": "capi", "rlmem_runtime.h": "capi", "version.h": "base"}


def allowed_parts():
    """Each part with itself and every part below it."""
    closure = {}

    def below(part, seen):
        if part in closure:
            return closure[part]
        if part in seen:
            raise SystemExit(f"LAYERS has a cycle through {part}")
        reach = {part}
        for lower in LAYERS[part]:
            reach |= below(lower, seen | {part})
        closure[part] = reach
        return reach

    for part in LAYERS:
        below(part, frozenset())
    return closure


def part_of(path, source, build):
    """(part, private) for a file of the project, None for anything else (system headers)."""
    for root in (build, source):  # the build folder may lie inside the source folder
        try:
            relative = path.relative_to(root)
        except ValueError:
            continue
        pieces = relative.parts
        if len(pieces) >= 3 and pieces[:2] == ("include", "rlmem"):
            if len(pieces) == 3:
                return TOP_HEADERS.get(pieces[2], "include/rlmem/" + pieces[2]), False
            return pieces[2], False
        if len(pieces) >= 3 and pieces[0] == "src":
            return pieces[1], True
        if root == source:
            return str(relative), True  # a test's or a tool's file: no part's to include
    return None


def dependencies(depfile):
    """The prerequisites of a make rule written by the compiler (-MD), as written."""
    text = depfile.read_text().replace("\\\n", " ").replace("\\ ", "\0")
    found = []
    for line in text.splitlines():
        if ":" in line:
            found += [word.replace("\0", " ") for word in line.split(":", 1)[1].split()]
    return found


def resolve(written, compile_dir, build):
    """A dependency as an absolute path: relative ones are relative to where the compiler ran
    (the target's folder for Makefiles, the build's top for Ninja; ccache's base_dir writes them
    so)."""
    path = pathlib.Path(written)
    if path.is_absolute():
        return path.resolve()
    candidate = (compile_dir / path).resolve()
    return candidate if candidate.exists() else (build / path).resolve()


def cmake_list(text, name):
    match = re.search(r"set\(" + name + r"\s*\n(.*?)\n\s*\)", text, re.S)
    return re.findall(r'"([^"]*)"', match.group(1)) if match else []


def main():
    if len(sys.argv) != 3:
        print("usage: layers_are_respected.py SOURCE_DIR BUILD_DIR", file=sys.stderr)
        return 2
    source, build = (pathlib.Path(arg).resolve() for arg in sys.argv[1:])
    closure = allowed_parts()
    failures = []

    parts_in_tree = {p.name for p in (source / "src").iterdir() if p.is_dir()}
    parts_in_tree |= {p.name for p in (source / "include" / "rlmem").iterdir() if p.is_dir()}
    for part in sorted(parts_in_tree - LAYERS.keys()):
        failures.append(f"src/{part} or include/rlmem/{part} is a part without a row in LAYERS")

    objects = targets = 0
    # (part, the part it must not read) -> (headers, objects): one line per wrong pair of parts.
    wrong_reads = {}
    for info in sorted((build / "src").glob("**/CMakeFiles/*.dir/DependInfo.cmake")):
        part = info.relative_to(build / "src").parts[0]
        target = info.parent.name.removesuffix(".dir")
        if part not in LAYERS:
            failures.append(f"target {target} in src/{part}: a part without a row in LAYERS")
            continue
        targets += 1
        may_use = closure[part]
        text = info.read_text()
        for linked in cmake_list(text, "CMAKE_TARGET_LINKED_INFO_FILES"):
            found = part_of(pathlib.Path(linked).resolve(), source, build)
            if found and found[0] not in may_use:
                failures.append(f"{target} ({part}) links {pathlib.Path(linked).parent.name.removesuffix('.dir')} "
                                f"({found[0]}); {part} may use only: {', '.join(sorted(may_use))}")
        rows = cmake_list(text, "CMAKE_DEPENDS_DEPENDENCY_FILES")
        for source_file, object_file, _compiler, depfile in zip(*[iter(rows)] * 4):
            depfile_path = build / depfile
            shown = pathlib.Path(source_file).resolve()
            shown = shown.relative_to(source) if shown.is_relative_to(source) else shown
            if not depfile_path.exists():
                failures.append(f"{shown}: no dependency file {depfile} (build every target first)")
                continue
            objects += 1
            compile_dir = build / object_file.split("/CMakeFiles/")[0]
            for written in dependencies(depfile_path):
                path = resolve(written, compile_dir, build)
                found = part_of(path, source, build)
                if found is None:
                    continue
                header_part, private = found
                header = path.relative_to(build) if path.is_relative_to(build) else path.relative_to(source)
                if private and header_part != part:
                    whose = f"private files of {header_part}"
                elif header_part not in may_use:
                    whose = f"headers of {header_part}"
                else:
                    continue
                headers, readers = wrong_reads.setdefault((part, whose), (set(), set()))
                headers.add(str(header))
                readers.add(str(shown))
    for (part, whose), (headers, readers) in sorted(wrong_reads.items()):
        readers = sorted(readers)
        failures.append(f"{part} reads {whose}, directly or through its includes: {', '.join(sorted(headers))}; "
                        f"in {len(readers)} object(s): {', '.join(readers[:3])}{' ...' if len(readers) > 3 else ''}; "
                        f"{part} may use only {', '.join(sorted(closure[part]))}")
    if objects == 0:
        failures.append(f"no compiled object under {build}/src: build first")
    for failure in failures:
        print("FAIL " + failure)
    if failures:
        return 1
    print(f"{objects} objects of {targets} targets read and link only their own part's and lower parts' code")
    return 0


if __name__ == "__main__":
    sys.exit(main())
