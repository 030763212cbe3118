"""What Python's and torch's API say about a value: the annotations, attributes and calls scope
inference reads as evidence that a name is a tensor, a plain value or a dict."""

from __future__ import annotations

import re

# Annotations that make a name a tensor, and the ones that make it something else.
TENSOR_ANNOTATIONS = frozenset({"Tensor", "Parameter"})
NON_TENSOR_ANNOTATIONS = frozenset(
    ["int", "float", "bool", "str", "bytes", "dtype", "device", "Size", "tuple", "constexpr", "list", "dict"]
)
# Attributes of a tensor that describe it without being it: fine in a config key.
TENSOR_METADATA = frozenset(
    [
        "shape",
        "dtype",
        "device",
        "ndim",
        "size",
        "stride",
        "numel",
        "dim",
        "is_contiguous",
        "layout",
        "requires_grad",
        "is_cuda",
        "element_size",
        "itemsize",
        "nbytes",
        "storage_offset",
        "is_leaf",
        "names",
    ]
)
# Methods whose result is a plain value, whatever they are called on.
VALUE_METHODS = TENSOR_METADATA | {"item", "tolist", "data_ptr", "get_device", "__len__", "__hash__"}
# Attribute uses that only a tensor (or an array-like) has: evidence that an unannotated name is one.
TENSOR_USES = frozenset(
    [
        "data_ptr",
        "contiguous",
        "stride",
        "untyped_storage",
        "storage",
        "is_contiguous",
        "element_size",
        "numel",
        "_version",
        "detach",
        "view",
        "reshape",
        "transpose",
        "permute",
        "unsqueeze",
        "squeeze",
        "requires_grad_",
        "new_empty",
        "new_zeros",
        "storage_offset",
        "t",
        "T",
        "mT",
    ]
)
# torch functions whose first argument is a size or a value, not a tensor.
TORCH_FACTORIES = frozenset(
    [
        "arange",
        "zeros",
        "ones",
        "empty",
        "full",
        "randn",
        "rand",
        "randint",
        "randperm",
        "tensor",
        "as_tensor",
        "asarray",
        "linspace",
        "logspace",
        "eye",
        "empty_strided",
        "from_numpy",
        "range",
        "scalar_tensor",
    ]
)
TENSOR_VIEW_ATTRS = frozenset({"T", "mT", "H", "data", "grad"})
# Calls that return a plain value (the `x.shape[0]`, `float()`, `bool()` of the issue).
VALUE_CALLS = frozenset(
    [
        "int",
        "float",
        "bool",
        "str",
        "repr",
        "len",
        "tuple",
        "list",
        "dict",
        "set",
        "frozenset",
        "max",
        "min",
        "sum",
        "round",
        "divmod",
        "isinstance",
        "hasattr",
        "callable",
        "id",
        "hash",
        "range",
        "enumerate",
        "zip",
        "sorted",
        "type",
        "triton.cdiv",
        "triton.next_power_of_2",
        "cdiv",
        "next_power_of_2",
    ]
)
# torch calls that return something other than a tensor.
NON_TENSOR_TORCH_CALLS = re.compile(
    r"^torch\.(cuda\.|backends\.|finfo|iinfo|device|Size|get_|is_|are_|dtype|compile|no_grad|"
    r"enable_grad|inference_mode|autocast|library|ops\.|_C|_dynamo|Generator|Stream|Event|typename|"
    r"manual_seed|set_|use_)"
)
DICT_FACTORIES = frozenset(
    {
        "dict",
        "collections.OrderedDict",
        "collections.defaultdict",
        "OrderedDict",
        "defaultdict",
        "weakref.WeakKeyDictionary",
        "weakref.WeakValueDictionary",
    }
)
DICT_ANNOTATIONS = frozenset({"dict", "Dict", "MutableMapping", "OrderedDict", "defaultdict"})
