# issue: https://github.com/pytorch/pytorch/issues/198071
# title: [inductor] `torch.clamp` with a Python bound outside the dtype's range wraps the bound: `clamp(int8_tensor, -1000, 1000)` returns `-24` for every element
# expected: bug
# verdict: eager_error_compiled_returns
# culprit: aten.clamp on int8 with Python-int bounds outside the dtype range (Inductor casts the bound to int8 before comparing: 1000 -> -24, 300 -> 44)
# grad: no
# discussion: open; labels module: correctness (silent), module: inductor, release triage (bot-triaged). Reporter: eager raises
#   "value cannot be converted to type int8_t without overflow" on 2.14.0 (returns x unchanged on nightly); Inductor returns the
#   wrapped bound on both; aot_eager matches eager. The loop body after "try:" was cut in the thread excerpt and is completed here.
# reproduces: yes on 2.13.0 CPU: eager and aot_eager raise RuntimeError (int8 overflow), inductor returns [-24]*5 and 127 -> 44 (no max abs diff: eager has no value)
import torch

x = torch.tensor([-128, -3, 0, 5, 127], dtype=torch.int8)
for name, fn in (("clamp(x, -1000, 1000)", lambda t: torch.clamp(t, -1000, 1000)),
                 ("clamp(x, max=300)", lambda t: torch.clamp(t, max=300))):
    out = []
    for backend in (None, "aot_eager", "inductor"):
        torch._dynamo.reset()
        try:
            f = fn if backend is None else torch.compile(fn, backend=backend)
            out.append(f(x.clone()).tolist())
        except Exception as e:
            out.append(f"{type(e).__name__}: {str(e).splitlines()[0]}")
    print(f"{name:24s} eager={out[0]}  aot_eager={out[1]}  inductor={out[2]}")
