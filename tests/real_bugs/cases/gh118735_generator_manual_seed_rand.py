# issue: https://github.com/pytorch/pytorch/issues/118735
# title: [torch.compile] default generator manual_seed() gave different random outputs with/without torch.compile
# expected: not_a_bug
# verdict: random_draws         (the package's verdict for random numbers drawn otherwise than eager, by design)
# culprit: torch.rand RNG (Inductor generates its own random numbers; manual_seed inside the compiled fn does not reproduce eager's stream)
# grad: no
# discussion: closed; labels oncall: pt2. malfet: random sequences are not expected to stay the same between eager and compile;
#   eellison: "This is intended behavior. You can set torch._inductor.config.fallback_random = True to use the same RNG as eager".
# reproduces: yes on 2.13.0 CPU: t1 (explicit generator) equal, t2 eager 0.8823 vs compiled 0.0502 (diff 0.832), as in the issue; with fallback_random=True diff 0
import torch


def func():
    g = torch.Generator().manual_seed(42)
    t1 = torch.rand(1, generator=g)
    torch.manual_seed(42)
    t2 = torch.rand(1)
    return t1, t2


opt_func = torch.compile(func)

eager = func()
compiled = opt_func()
print(eager)
print(compiled)
print("max diff t1:", (eager[0] - compiled[0]).abs().max().item())
print("max diff t2:", (eager[1] - compiled[1]).abs().max().item())
