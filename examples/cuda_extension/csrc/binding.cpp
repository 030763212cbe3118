// The Python binding of the CUDA kernel: the Python C API only (no torch headers), so that nvcc
// compiles one small file and a rebuild takes seconds.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <cuda_runtime.h>

#include <cstdint>

cudaError_t sgemm_launch(const float* a, const float* b, float* c, std::int64_t m, std::int64_t n, std::int64_t k,
                         cudaStream_t stream);

namespace {

PyObject* py_sgemm(PyObject*, PyObject* args) {
  unsigned long long a, b, c, stream;
  long long m, n, k;
  if (!PyArg_ParseTuple(args, "KKKLLLK", &a, &b, &c, &m, &n, &k, &stream)) return nullptr;
  const cudaError_t status =
      sgemm_launch(reinterpret_cast<const float*>(a), reinterpret_cast<const float*>(b), reinterpret_cast<float*>(c),
                   m, n, k, reinterpret_cast<cudaStream_t>(stream));
  if (status != cudaSuccess) {
    PyErr_SetString(PyExc_RuntimeError, cudaGetErrorString(status));
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"sgemm", py_sgemm, METH_VARARGS, "sgemm(a_ptr, b_ptr, c_ptr, M, N, K, stream): C = A @ B, float32"},
    {nullptr, nullptr, 0, nullptr}};
PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit__C() { return PyModule_Create(&module); }
