"""Builds matmulext._C with torch.utils.cpp_extension: `python setup.py build_ext --inplace`."""

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(
    name="matmulext",
    packages=["matmulext"],
    ext_modules=[CppExtension("matmulext._C", ["csrc/matmul.cpp"], extra_compile_args=["-O3"])],
    cmdclass={"build_ext": BuildExtension},
)
