"""Builds sgemmext._C with torch.utils.cpp_extension (nvcc for the kernel):
`python setup.py build_ext --inplace`; TORCH_CUDA_ARCH_LIST=9.0 builds for the H100/H200 only."""

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    name="sgemmext",
    packages=["sgemmext"],
    ext_modules=[
        CUDAExtension(
            "sgemmext._C",
            ["csrc/binding.cpp", "csrc/sgemm.cu"],
            extra_compile_args={"cxx": ["-O3"], "nvcc": ["-O3"]},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
