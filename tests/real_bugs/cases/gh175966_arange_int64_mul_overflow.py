# issue: https://github.com/pytorch/pytorch/issues/175966
# title: Silently incorrect results for torch.arange + Inductor
# expected: bug
# verdict: inaccurate
# culprit: aten.arange (int64) * constant int64 tensor folded into the index expression 1000000000*x0; on CPU the vectorized codegen emits VectorizedN<int64_t,2>::arange(tmp1, 1000000000), whose per-lane i*step wraps in 32 bits above 2**31
# grad: no
# discussion: open; labels module: inductor, PT2-Bug-Bash, pt2: ubn (bot-triaged). aot_eager_decomp_partition matches eager,
#   so the decompositions are fine and Inductor's codegen is blamed; reported with generated Triton code on CUDA. Sibling report #183901.
#   Device changed from cuda to cpu; a max-abs-diff print added.
# reproduces: yes on 2.13.0 CPU, max abs diff 8589934592 (8 of 11 elements wrapped, e.g. 3e9 -> -1294967296)
import torch

def kek(x):
    return torch.arange(
        0, 11, device=x.device, dtype=torch.int64
    ) * torch.tensor([int(1e9)], dtype=torch.int64, device=x.device)

x = torch.zeros(1, device='cpu')

eager = kek(x)
print(eager)
# output:
# tensor([          0,  1000000000,  2000000000,  3000000000,  4000000000,
#          5000000000,  6000000000,  7000000000,  8000000000,  9000000000,
#         10000000000])


print(torch.compile(kek, backend="aot_eager_decomp_partition")(x))

compiled = torch.compile(kek, backend="inductor")(x)
print(compiled)
print("max abs diff:", (eager - compiled).abs().max().item())
