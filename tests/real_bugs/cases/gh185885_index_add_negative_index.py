# issue: https://github.com/pytorch/pytorch/issues/185885
# title: [Inductor] torch.index_add accepts negative index while eager raises out-of-bounds error
# expected: bug
# verdict: eager_error_compiled_returns
# culprit: aten.index_add lowering (index_put/scatter with wrap-around of negative indices) skips eager's bounds check "index -1 is out of bounds for dimension 0 with size 4"
# grad: no
# discussion: open; labels bot-triaged, module: inductor, oncall: pt2, triaged. Tracked under the "Validation lost" umbrella (#197554):
#   eager rejects the negative index, Inductor wraps it and updates the last row.
# reproduces: yes on 2.13.0 CPU, eager RuntimeError (index -1 out of bounds), compiled returns a tensor with row 3 updated (diff n/a)
import traceback
import torch

def fn():
    x = torch.zeros(4, 3, dtype=torch.float32)
    index = torch.tensor([0, -1], dtype=torch.int64)
    src = torch.ones(2, 3, dtype=torch.float32)

    result = torch.index_add(x, 0, index, src)
    observer = result.clamp_max(1.0)
    return result, observer

print("torch", torch.__version__)

try:
    eager = fn()
    print("eager returned:", eager[0])
except Exception as e:
    print("eager raised:", type(e).__name__, str(e).splitlines()[0])

try:
    compiled = torch.compile(fn, backend="inductor", fullgraph=True, dynamic=True)()
    print("compiled returned:", compiled[0])
except Exception as e:
    print("compiled raised:", type(e).__name__, str(e).splitlines()[0])
