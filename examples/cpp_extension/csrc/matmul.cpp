// C = A @ B for row-major float32 A (M x K), B (K x N), C (M x N): the campaign's kernel.
// The Python C API only (no torch headers), so a build takes about a second.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>

namespace {

void matmul(const float* a, const float* b, float* c, std::int64_t m, std::int64_t n, std::int64_t k) {
  // i-j-p order: the inner loop walks B down a column, a new cache line per multiply-add.
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (std::int64_t p = 0; p < k; ++p) acc += a[i * k + p] * b[p * n + j];
      c[i * n + j] = acc;
    }
  }
}

PyObject* py_matmul(PyObject*, PyObject* args) {
  unsigned long long a, b, c;
  long long m, n, k;
  if (!PyArg_ParseTuple(args, "KKKLLL", &a, &b, &c, &m, &n, &k)) return nullptr;
  Py_BEGIN_ALLOW_THREADS
  matmul(reinterpret_cast<const float*>(a), reinterpret_cast<const float*>(b), reinterpret_cast<float*>(c), m, n, k);
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"matmul", py_matmul, METH_VARARGS, "matmul(a_ptr, b_ptr, c_ptr, M, N, K): C = A @ B, float32"},
    {nullptr, nullptr, 0, nullptr}};
PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit__C() { return PyModule_Create(&module); }
