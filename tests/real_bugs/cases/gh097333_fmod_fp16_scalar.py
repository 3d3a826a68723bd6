# issue: https://github.com/pytorch/pytorch/issues/97333
# title: `torch.fmod` produces inconsistent results in eager and compile mode
# expected: bug
# verdict: inaccurate
# culprit: fmod with Python float scalar 2.3 on float16 tensor: eager casts the scalar to float16, Inductor keeps static_cast<float>(2.3)
# grad: no
# discussion: closed; labels module: cpu, module: half, triaged. CaoE (Intel): "The root cause of this case is: 2.3 will be casted to float16 on eager while inductor will directly keep 2.3 as float data type, i.e., auto tmp2 = static_cast<float>(2.3);" Same class later fixed for fmod/remainder by PR #186942 (fixes #186875).
# reproduces: torch 2.13.0 CPU: allclose(rtol=1e-2, atol=1e-3) fails; every element off by ~1 fp16 ulp, max abs diff 0.00232 (e.g. 6.9805 -> eager 0.0781, compiled 0.0804)
import torch

def fn(x):
    return torch.fmod(x, 2.3)
    # "✔️" means that the program works fine with the substitution.
    # ✔️ return torch.fmod(x, 2.5)

x = torch.tensor(
  [[4.9805, 6.6445, 5.6836, 6.1055],
   [3.4121, 4.1406, 5.1523, 5.9766],
   [3.3691, 4.4102, 6.8008, 4.0156],
   [6.8633, 6.8750, 6.9805, 5.7070]], dtype=torch.float16)
# ✔️ dtype=torch.float32
# ✔️ x = torch.rand([4, 4], dtype=torch.float16)

ret_eager = fn(x)
compiled = torch.compile(fn)
ret_compiled = compiled(x)

ok = torch.allclose(
    ret_eager, ret_compiled,
    rtol=1e-2, atol=1e-3, equal_nan=True,
)
if not ok:
    print('\n'.join([
        '',
        f'>>> ret_eager',
        str(ret_eager),
        f'>>> ret_compiled',
        str(ret_compiled),
    ]))
    print("max abs diff:", (ret_eager.float() - ret_compiled.float()).abs().max().item())
print('==== Check OK! ====')
