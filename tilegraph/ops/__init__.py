"""The operator library: te definitions of common tensor operators (names and layouts as TVM topi).

Every op returns a te.Tensor tagged with its op name; `tilegraph.testing.reference_outputs`
recomputes any workload built from these ops in numpy float64.
"""

from tilegraph.ops.attention import attention
from tilegraph.ops.conv import (
    conv1d_nlc,
    conv2d_capsule_nhwijc,
    conv2d_nchw,
    conv2d_nhwc,
    conv2d_transpose_nhwc,
    conv3d_ndhwc,
    depthwise_conv2d_nhwc,
)
from tilegraph.ops.elementwise import (
    add,
    bitand,
    bitor,
    bitxor,
    div,
    exp,
    fmod,
    gelu,
    maximum,
    minimum,
    mod,
    mul,
    relu,
    shl,
    shr,
    sigmoid,
    sub,
    tanh,
)
from tilegraph.ops.indexing import broadcast_to, concat, gather_elements, pad_constant, strided_slice, take
from tilegraph.ops.math import (
    abs,
    cast,
    clip,
    equal,
    erf,
    gelu_tanh,
    greater,
    greater_equal,
    hard_sigmoid,
    hard_swish,
    isnan,
    less,
    less_equal,
    log,
    logical_and,
    logical_not,
    logical_or,
    neg,
    power,
    reciprocal,
    sqrt,
    where,
)
from tilegraph.ops.matmul import batch_matmul, dense, matmul, matmul_nd
from tilegraph.ops.norm import batch_norm, layer_norm, norm_bmn
from tilegraph.ops.pool import avg_pool2d, global_avg_pool2d, max_pool2d
from tilegraph.ops.reduce import max, mean, min, prod, sum
from tilegraph.ops.softmax import softmax
from tilegraph.ops.subgraphs import conv2d_bn_relu, transpose_batch_matmul
from tilegraph.ops.transform import reshape, transpose
from tilegraph.ops.winograd import winograd_input_nhwc, winograd_output_nhwc

__all__ = [
    "attention", "conv1d_nlc", "conv2d_capsule_nhwijc", "conv2d_nchw", "conv2d_nhwc", "conv2d_transpose_nhwc", "conv3d_ndhwc",
    "depthwise_conv2d_nhwc", "add", "div", "exp", "gelu", "maximum", "minimum", "mul", "relu", "sigmoid", "sub",
    "tanh", "batch_matmul", "dense", "matmul", "batch_norm", "layer_norm", "norm_bmn", "avg_pool2d",
    "global_avg_pool2d", "max_pool2d", "max", "mean", "min", "sum", "softmax", "conv2d_bn_relu",
    "transpose_batch_matmul", "reshape", "transpose", "winograd_input_nhwc", "winograd_output_nhwc",
    "broadcast_to", "concat", "gather_elements", "pad_constant", "strided_slice", "take", "abs", "cast", "clip",
    "equal", "erf", "gelu_tanh", "greater", "hard_sigmoid", "hard_swish", "isnan", "less", "log", "logical_not",
    "neg", "power", "reciprocal", "sqrt", "where", "matmul_nd",
    "less_equal", "greater_equal", "logical_and", "logical_or", "mod", "fmod", "prod", "bitand", "bitor", "bitxor", "shl", "shr",
]
