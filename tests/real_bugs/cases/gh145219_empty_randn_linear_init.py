# issue: https://github.com/pytorch/pytorch/issues/145219
# title: `torch.compile` may produce wrong result with `Linear+MaxPool2d+BatchNorm2d`.
# expected: not_a_bug
# verdict: nondeterministic
# culprit: torch.empty (uninitialized memory) + torch.randn + nn.Linear random init inside fn: each call builds different inputs/weights
# grad: yes
# discussion: closed; labels oncall: cpu inductor, oncall: pt2. DDEle: "torch.randn and torch.empty are not guaranteed to give
#   the same output on each call ... simply calling fn() twice without torch.compile will give different results"; passing the
#   tensors/weights in as arguments gives no error.
# reproduces: yes on 2.13.0 CPU: max diff 0.87 / 4.52 on the two outputs; fresh randn/empty/Linear init per call, so two eager calls differ too
import torch


def fn():
    v4_0 = torch.nn.Parameter(torch.randn([8, 1, 4, 1], dtype=torch.float32), requires_grad=True)
    v5_0 = torch.nn.Parameter(torch.empty([1, 1, 4, 1], dtype=torch.float32), requires_grad=True)
    v6_0 = torch.cat((v4_0, v5_0), dim=0)
    v6_0_flat = v6_0.view(-1, 1)  # 展平并调整形状
    linear_layer = torch.nn.Linear(in_features=1, out_features=43, bias=True)
    v2_0 = linear_layer(v6_0_flat)
    v2_0_unsqueezed = v2_0.unsqueeze(0).unsqueeze(0)  # 添加批次和通道维度以满足 MaxPool2d 的输入要求
    maxpool_layer = torch.nn.MaxPool2d(kernel_size=(2, 42), stride=2, padding=0, dilation=1, ceil_mode=False)
    v1_0 = maxpool_layer(v2_0_unsqueezed)
    batchnorm_layer = torch.nn.BatchNorm2d(1, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)
    v0_0 = batchnorm_layer(v2_0_unsqueezed)
    return v1_0, v0_0


ret_eager = fn()
compiled = torch.compile(fn)
ret_compiled = compiled()

# torch.testing.assert_close(ret_eager[0], ret_compiled[0]) / [1] in the original; printed instead
print("max diff [0]:", (ret_eager[0] - ret_compiled[0]).abs().max().item())
print("max diff [1]:", (ret_eager[1] - ret_compiled[1]).abs().max().item())
