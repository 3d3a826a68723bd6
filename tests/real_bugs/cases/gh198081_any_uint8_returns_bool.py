# issue: https://github.com/pytorch/pytorch/issues/198081
# title: [inductor] `torch.any` on a uint8 tensor returns bool under `torch.compile` (eager and `torch.all` keep uint8), so downstream uint8 arithmetic silently changes
# expected: bug
# verdict: inaccurate
# culprit: Inductor reduce_any lowering (aten.any on uint8 returns bool instead of uint8)
# grad: no
# discussion: open; labels module: correctness (silent), module: inductor, oncall: pt2, release triage; the report pins it to Inductor's own reduce_any lowering bypassing the _refs.any uint8 result-type rule; aot_eager matches eager.
# reproduces: yes on 2.13.0 CPU, torch.any(x) eager 1 uint8 vs inductor True bool; any(x)*200+100 eager 44 vs inductor 300
import torch

x = torch.tensor([[0, 3], [0, 0]], dtype=torch.uint8)
for name, f in {"torch.any(x)": lambda x: torch.any(x), "torch.all(x)": lambda x: torch.all(x), "x.any(0)": lambda x: x.any(0),
                "any(x) * 200 + 100": lambda x: torch.any(x) * 200 + 100}.items():
    e = f(x)
    row = [f"eager {e.tolist()} {e.dtype}"]
    for b in ["aot_eager", "inductor"]:
        torch._dynamo.reset()
        c = torch.compile(f, backend=b)(x)
        row.append(f"{b} {c.tolist()} {c.dtype}")
    print(name, " | ".join(row))
