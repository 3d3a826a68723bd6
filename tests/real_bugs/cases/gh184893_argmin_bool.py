# issue: https://github.com/pytorch/pytorch/issues/184893
# title: [Inductor] argmin/min returns incorrect indices for boolean tensors
# expected: bug
# verdict: inaccurate
# culprit: argmin/min(dim) reduction on bool tensors in CPU C++ codegen (VecMask<float,N> payload compared via float arg-reduction path)
# grad: no
# discussion: closed; labels bot-triaged, high priority, module: correctness (silent), module: cpu, module: inductor. CPU twin of #174069 (fixed for Triton only by #174076). Fix PRs #185157 / #185970 ("Fixes #184893"): "CPU C++ codegen represents vectorized boolean values as VecMask<float, N> ... true lanes can be treated like NaN-ish float mask values"; fix casts bool->int32 before argmin/argmax.
# reproduces: yes on torch 2.13.0+cpu: n=1 PASS, n=2..7 FAIL (compiled min(0).indices differ from eager; compiled picks True-valued rows where eager picks False)
import torch
device = 'cpu'

def fnmax(x):
    return x.max(0)
def fnmin(x):
    return x.min(0)

for n in range(1, 8):
    t1 = torch.randint(2, size=(n, 32), dtype=torch.bool, device=device)
    for desc, fn in [('min', fnmin)]:
        print(f"Testing {desc} {n=}...")
        eager = fn(t1)
        compiled = torch.compile(fn, backend='inductor')(t1)
        eager_values = [t1[j][i].item() for i, j in enumerate(eager.indices)]
        compiled_values = [t1[j][i].item() for i, j in enumerate(compiled.indices)]
        print("\tEager values:   ", eager_values)
        print("\tCompiled values:", compiled_values)
        check = "PASS" if eager.indices.tolist() == compiled.indices.tolist() else "FAIL"
        print(f"\t{check}")
