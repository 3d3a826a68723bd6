# issue: none
# title: small pre-norm transformer block inference (no-false-alarm check)
# expected: not_a_bug
# verdict: passed
# culprit: -
# grad: no
# discussion: own script; LayerNorm + causal multi-head self-attention (explicit matmul/softmax) + GELU MLP,
#   fp32, dropout-free, eval mode.
# reproduces: runs clean on 2.13.0 CPU: max diff 3.0e-7, allclose True
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, d_model=64, n_heads=4):
        super().__init__()
        self.n_heads = n_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        B, T, C = x.shape
        h = self.ln1(x)
        q, k, v = self.qkv(h).split(C, dim=-1)
        q = q.view(B, T, self.n_heads, -1).transpose(1, 2)
        k = k.view(B, T, self.n_heads, -1).transpose(1, 2)
        v = v.view(B, T, self.n_heads, -1).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        att = att.masked_fill(mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        x = x + self.mlp(self.ln2(x))
        return x


model = Block().eval()
x = torch.randn(2, 16, 64)

with torch.no_grad():
    eager = model(x)
    compiled = torch.compile(model)(x)

print("max diff:", (eager - compiled).abs().max().item())
print("allclose:", torch.allclose(eager, compiled, rtol=1e-4, atol=1e-5))
