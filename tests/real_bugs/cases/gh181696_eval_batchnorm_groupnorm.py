# issue: https://github.com/pytorch/pytorch/issues/181696
# title: Eval-mode `BatchNorm`/`GroupNorm` produces wrong output under `torch.compile(backend='inductor')`
# expected: not_a_bug
# verdict: amplified_rounding
# verdict note: decided as inaccurate (bug) from the labels when collected; changed to amplified_rounding, a verdict
#   added for this mechanism. float64 finds compiled code exact (the group norm of constant values is 0) and eager
#   3.6e-6 off, which log(clamp(t, 1e-6)) amplifies to 1.29; the fix PR (#184644) describes itself as "avoiding
#   log(clamp) amplification of small rounding differences" by matching eager's kernel numerics, and #150165's
#   maintainer calls the same situation "torch.compile being more accurate than eager". Not a miscompile.
# culprit: aten.native_group_norm decomposition (var_mean lowered to a Welford reduction) on nearly-identical values after eval BatchNorm1d + ELU: m2 collapses to 0, so GroupNorm output is zeroed and log(clamp(.)) explodes
# grad: no
# discussion: open; labels high priority, module: aotdispatch, module: correctness (silent), module: decompositions. eellison posted a
#   CompilerBisector repro; fix attempts #183654 (jansel, FMA/addcmul approach) and #187092 (closed in favor of it). Same root cause as #183120.
# reproduces: yes on 2.13.0 CPU, max abs diff 1.288699
import torch
import torch.nn as nn


def foo():
    torch._dynamo.reset()

    def gen():
        torch.manual_seed(0)
        bn  = nn.BatchNorm1d(10).eval()   # running_mean=0, running_var=1 (default init)
        elu = nn.ELU()
        gn  = nn.GroupNorm(10, 10).eval()
        return bn, elu, gn

    def model(bn, elu, gn):
        x = torch.ones([6, 10, 12])
        t = bn(x)          # eval: normalise with running_mean/var, apply weight/bias
        t = elu(t)
        t = gn(t)          # <- mismatch appears after this second norm layer
        t = torch.log(torch.clamp(t, min=1e-6))
        return t

    eager_out = model(*gen())
    compiled_out = torch.compile(model, fullgraph=True)(*gen())

    print("max diff:", (eager_out - compiled_out).abs().max().item())

    try:
        torch.testing.assert_close(eager_out, compiled_out)
        return True
    except AssertionError:
        return False

print("matches eager:", foo())
# Expected: ~0.0
