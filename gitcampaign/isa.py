"""`git campaign analyze --isa`: the SASS of the compiled kernels a profile names.

Triton keeps each compiled kernel as `NAME.cubin` (with `NAME.json`, its metadata: warps, stages,
shared memory) in a folder of the measured tree's `TRITON_CACHE_DIR` (gitcampaign.measure.
triton_cache_env: one cache per content of the tree, so the profile's processes and these files
agree). An autotuned kernel has one cubin per configuration it compiled; each is disassembled with
`cuobjdump -sass` (or `nvdisasm`), from the CUDA toolkit on PATH or the copies Triton ships in
`triton/backends/nvidia/bin`. Each listing is written beside the run's logs, and the note gets a
summary per cubin: instruction count and the instruction classes a kernel engineer reads first
(tensor-core MMAs, global, shared and local memory, barriers).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

TOOLS = ("cuobjdump", "nvdisasm")
DISASSEMBLE_TIMEOUT_S = 120.0
# Opcode classes by the SASS mnemonic's first word (before any `.` modifier).
CLASSES = {
    "tensor_mma": re.compile(r"^(HGMMA|WGMMA|UTCMMA|UTCHMMA|HMMA|IMMA|QMMA|OMMA)$"),
    "global_load": re.compile(r"^(LDG|LDGSTS|UTMALDG)$"),
    "global_store": re.compile(r"^(STG|UTMASTG|RED|ATOMG)$"),
    "shared": re.compile(r"^(LDS|STS|LDSM|STSM|ATOMS)$"),
    "local_spill": re.compile(r"^(LDL|STL)$"),
    "barrier": re.compile(r"^(BAR|SYNCS|WARPSYNC|DEPBAR|MEMBAR)$"),
}
# A SASS instruction line: `/*0080*/   @!P0 LDG.E.128 R4, desc[UR6][R2.64] ;`
_INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)[.\s;]")


@dataclass
class Listing:
    kernel: str
    cubin: str  # relative to the cache
    sass: str  # where the listing was written
    instructions: int
    classes: dict[str, int]
    metadata: dict[str, Any] = field(default_factory=dict)  # Triton's: num_warps, num_stages, shared


def tool() -> Path | None:
    """cuobjdump or nvdisasm: on PATH (the CUDA toolkit), else the copies Triton ships."""
    for name in TOOLS:
        found = shutil.which(name)
        if found:
            return Path(found)
    spec = importlib.util.find_spec("triton")  # found without importing triton
    if spec is not None and spec.origin is not None:
        bundled = Path(spec.origin).parent / "backends" / "nvidia" / "bin"
        for name in TOOLS:
            if (bundled / name).is_file():
                return bundled / name
    return None


def cubins(cache: Path, kernels: list[str]) -> list[Path]:
    """The cubins of `kernels` (names as Triton gives its kernels) in a Triton cache, by folder."""
    wanted = set(kernels)
    found = sorted(cache.glob("*/*.cubin")) if cache.is_dir() else []
    return [path for path in found if path.stem in wanted]


def summary(sass: str) -> tuple[int, dict[str, int]]:
    """(instruction count, count per class) of a SASS listing."""
    opcodes = [match.group(1) for match in _INSTRUCTION.finditer(sass)]
    return len(opcodes), {
        name: sum(1 for opcode in opcodes if pattern.match(opcode)) for name, pattern in CLASSES.items()
    }


def disassemble(disassembler: Path, cubin: Path, cache: Path, out_dir: Path) -> Listing:
    argv = [str(disassembler), "-sass" if disassembler.name == "cuobjdump" else "-c", str(cubin)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=DISASSEMBLE_TIMEOUT_S)
    text = (
        done.stdout
        if done.returncode == 0
        else f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr}"
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{cubin.parent.name[:12]}-{cubin.stem}.sass"
    target.write_text(text)
    count, classes = summary(text)
    metadata_path = cubin.with_suffix(".json")
    try:
        raw = json.loads(metadata_path.read_text()) if metadata_path.is_file() else {}
    except ValueError:
        raw = {}
    metadata = {key: raw[key] for key in ("num_warps", "num_stages", "num_ctas", "shared") if key in raw}
    return Listing(cubin.stem, str(cubin.relative_to(cache)), str(target), count, classes, metadata)


def listings(cache: Path, kernels: list[str], out_dir: Path) -> dict[str, Any]:
    """The note's `isa` record: each cubin's listing summary, or why there is none."""
    disassembler = tool()
    if disassembler is None:
        return {
            "listings": [],
            "why_none": "neither cuobjdump nor nvdisasm was found (install the CUDA toolkit, or put "
            "triton/backends/nvidia/bin on PATH)",
        }
    found = cubins(cache, kernels)
    if not found:
        return {
            "listings": [],
            "why_none": f"no compiled kernel of {', '.join(sorted(set(kernels))) or 'the profile'} in {cache}: "
            "Triton's CPU interpreter compiles nothing, and kernels not written in Triton (cuBLAS, torch) "
            "leave no cubin there",
        }
    return {
        "tool": str(disassembler),
        "cache": str(cache),
        "listings": [asdict(disassemble(disassembler, cubin, cache, out_dir)) for cubin in found],
    }
