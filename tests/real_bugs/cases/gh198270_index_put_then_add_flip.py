# issue: https://github.com/pytorch/pytorch/issues/198270
# title: [inductor] x.index_put_(...) followed by x.add_(x.flip(0)): the copy back into x is fused with a read of x at other positions (silent wrong results, CUDA and CPU)
# expected: bug
# verdict: inaccurate
# culprit: input mutation: aten.index_put_ then aten.add_ with a flipped read of the same input; Inductor fuses the copy_ back into x (mutation epilogue) with the flip read of x at other positions, so later elements read already-overwritten values
# grad: no
# discussion: open; labels high priority, module: correctness (silent), module: inductor, module: pt2-dispatcher.
#   Reporter: wrong at every size on CPU (nightly 2.15.0.dev20260921) and also on 2.9.1; no fix PR yet.
# reproduces: yes on 2.13.0 CPU, max abs diff 1.7926 (16 of 32 elements wrong)
import torch


def f(x):
    x.index_put_((torch.arange(x.size(0), device=x.device),), x * 2.0)
    x.add_(x.flip(0))
    return x


device = "cpu"
compiled = torch.compile(f)
for shape in ((4, 8),):
    x = torch.rand(*shape, device=device)
    want = f(x.clone())
    got = compiled(x.clone())
    print(shape, "mismatching elements:", int((got != want).sum()), "of", want.numel())
    print("max abs diff:", (got - want).abs().max().item())
