"""`analyze --isa` (gitcampaign/isa.py): a real sm_90 cubin, compiled without a GPU by the ptxas
Triton ships, laid out as Triton's cache lays it out, disassembled by the cuobjdump it ships."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

from gitcampaign import isa

# A kernel that stores one float: one global store, no MMA, no spill.
PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .entry _gemm_kernel(.param .u64 out)
{
  .reg .b64 %rd<3>;
  .reg .f32 %f<2>;
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd2, %rd1;
  mov.f32 %f1, 0f3F800000;
  st.global.f32 [%rd2], %f1;
  ret;
}
"""


def bundled(name: str) -> Path | None:
    spec = importlib.util.find_spec("triton")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "backends" / "nvidia" / "bin" / name
    return path if path.is_file() else None


@pytest.mark.skipif(bundled("ptxas") is None, reason="needs the ptxas Triton ships")
def test_the_cubins_of_the_profiled_kernels_are_listed(tmp_path: Path) -> None:
    cache = tmp_path / "triton-cache"
    entry = cache / "3fa2c1d0e9"
    entry.mkdir(parents=True)
    (tmp_path / "k.ptx").write_text(PTX)
    ptxas = bundled("ptxas")
    assert ptxas is not None
    subprocess.run(
        [str(ptxas), "-arch=sm_90", str(tmp_path / "k.ptx"), "-o", str(entry / "_gemm_kernel.cubin")],
        check=True,
    )
    (entry / "_gemm_kernel.json").write_text(
        json.dumps({"num_warps": 4, "num_stages": 3, "shared": 0, "name": "x"})
    )
    (entry / "_other_kernel.cubin").write_bytes(b"not profiled")

    record = isa.listings(cache, ["_gemm_kernel"], tmp_path / "isa")
    (listing,) = record["listings"]
    assert listing["kernel"] == "_gemm_kernel" and listing["cubin"] == "3fa2c1d0e9/_gemm_kernel.cubin"
    assert listing["metadata"] == {"num_warps": 4, "num_stages": 3, "shared": 0}
    assert listing["classes"]["global_store"] == 1 and listing["classes"]["local_spill"] == 0
    assert listing["instructions"] >= 3  # the loads of the parameter, the store, EXIT
    assert "STG.E" in Path(listing["sass"]).read_text()


def test_the_classes_of_a_sass_listing() -> None:
    sass = """
        /*0100*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24 ;  /* 0x00000000181879f0 */
        /*0110*/              @!P0 LDL.64 R2, [R1+0x8] ;                  /* 0x0000080001028983 */
        /*0120*/                   STL [R1], R0 ;                          /* 0x0000000001007387 */
        /*0130*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;           /* 0x0000000000007b1d */
        /*0140*/                   LDGSTS.E.BYPASS.128 [R5], desc[UR4][R2.64] ;
        /*0150*/                   EXIT ;
"""
    count, classes = isa.summary(sass)
    assert count == 6
    assert classes == {
        "tensor_mma": 1,
        "global_load": 1,
        "global_store": 0,
        "shared": 0,
        "local_spill": 2,
        "barrier": 1,
    }


def test_no_cubin_or_no_tool_is_said_plainly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if isa.tool() is not None:
        empty = isa.listings(tmp_path / "nothing", ["_gemm_kernel"], tmp_path / "isa")
        assert empty["listings"] == [] and "CPU interpreter compiles nothing" in empty["why_none"]
    monkeypatch.setattr(isa, "tool", lambda: None)
    missing = isa.listings(tmp_path, ["_gemm_kernel"], tmp_path / "isa")
    assert missing["listings"] == [] and "cuobjdump nor nvdisasm" in missing["why_none"]
