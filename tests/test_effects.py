"""What a call updates in place (an optimizer step, a cache write) is judged like its outputs:
which tensors :func:`find_effects` finds, and that :class:`Effects` runs each call from the same state."""

from __future__ import annotations

import torch

from instrumented_backend.diagnosis.effects import Effects, find_effects

_model = torch.nn.Linear(4, 3)
_optimizer = torch.optim.AdamW(_model.parameters(), lr=0.1, foreach=True)
_average = torch.zeros(3)


def _optimizer_step() -> None:
    _optimizer.step()


def _cache_write(cache: torch.Tensor, index: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    cache.index_copy_(0, index, x * 2)
    return x.sum()


def _moving_average(x: torch.Tensor) -> torch.Tensor:
    _average.mul_(0.9).add_(x, alpha=0.1)
    return x + 1


def _with_gradients() -> None:
    _model.zero_grad()
    _model(torch.ones(2, 4)).sum().backward()


def test_a_pure_function_has_no_effects():
    assert find_effects(lambda x: torch.sin(x) * 2, [torch.randn(3)]) is None


def test_an_argument_written_in_place_is_an_effect_and_the_others_are_not():
    cache, index, x = torch.zeros(4, 3), torch.tensor([1, 3]), torch.randn(2, 3)
    effects = find_effects(_cache_write, [cache, index, x])
    assert effects is not None and [item.name for item in effects.located] == ["input 0"]
    assert torch.equal(cache, torch.zeros(4, 3))  # the caller's arguments are never written
    result = effects(cache.clone(), index, x)
    assert torch.equal(result["output"], x.sum())
    assert torch.equal(result["updated"]["input 0"][[1, 3]], x * 2)


def test_a_named_tensor_updated_in_place_is_an_effect_put_back_after_each_call():
    _average.zero_()
    effects = find_effects(_moving_average, [torch.ones(3)])
    assert effects is not None and [item.name for item in effects.located] == ["_average"]
    first, second = effects(torch.ones(3)), effects(torch.ones(3))
    assert torch.allclose(first["updated"]["_average"], torch.full((3,), 0.1))
    assert torch.equal(first["updated"]["_average"], second["updated"]["_average"])  # from the same start
    assert torch.equal(first["output"], torch.full((3,), 2.0))
    assert torch.equal(_average, torch.zeros(3))  # and put back


def test_an_optimizer_step_updates_its_parameters_and_state_and_leaves_them_as_they_were():
    _with_gradients()
    weights = [p.detach().clone() for p in _model.parameters()]
    effects = find_effects(_optimizer_step, [])
    assert isinstance(effects, Effects)
    names = [item.name for item in effects.located]
    # named by the module of the step's namespace that holds them (the step names only the optimizer)
    assert names[:2] == ["_model.weight", "_model.bias"], names
    assert {"optimizer 0 exp_avg of _model.weight", "optimizer 0 exp_avg_sq of _model.bias",
            "optimizer 0 step of _model.weight"} <= set(names), names
    first, second = effects(), effects()
    assert set(first["updated"]) == set(names)
    for name in names:
        assert torch.equal(first["updated"][name], second["updated"][name]), name
    assert not torch.equal(first["updated"]["_model.weight"], weights[0])  # the step moved it
    assert all(torch.equal(p.detach(), w) for p, w in zip(_model.parameters(), weights))  # put back
    assert not _optimizer.state  # no state made by the judging runs either
    assert "judged with the" in effects.describe() and "_model.weight" in effects.describe()


def test_compiling_the_wrapper_compiles_the_function_alone():
    graphs = []
    torch._dynamo.reset()
    cache, index, x = torch.zeros(4, 3), torch.tensor([1, 3]), torch.randn(2, 3)
    effects = find_effects(_cache_write, [cache, index, x])
    compiled = torch.compile(effects, backend=lambda gm, example: (graphs.append(gm), gm.forward)[1])
    result = compiled(cache.clone(), index, x)
    assert torch.equal(result["updated"]["input 0"][[1, 3]], x * 2)
    assert len(graphs) == 1, [g.code for g in graphs]
    targets = [str(n.target) for n in graphs[0].graph.nodes if n.op in ("call_function", "call_method")]
    assert "index_copy_" in targets and not any("clone" in t or "copy_" == t for t in targets), targets


def test_running_statistics_are_effects_though_batch_norm_does_not_count_its_writes():
    """Batch norm in training mode writes its running statistics without bumping their version
    counters: found by their values. The float64 referee runs a float64 copy of the module."""
    from instrumented_backend.diagnosis.accuracy import fp64_reference

    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4)).train()
    x = torch.randn(8, 4)
    effects = find_effects(module, [x])
    assert effects is not None
    assert [item.name for item in effects.located] == ["1.running_mean", "1.running_var", "1.num_batches_tracked"]
    reference = fp64_reference(effects, [x], seed=0)
    assert reference["updated"]["1.running_mean"].dtype == torch.float64
    assert torch.equal(module[1].running_mean, torch.zeros(4)) and module[1].num_batches_tracked == 0


def test_check_accuracy_judges_a_cache_write_by_the_cache():
    """``ib.check_accuracy`` applies the same rule: a wrong value written into an argument fails
    though the call's own output is right."""
    import instrumented_backend as ib

    def write(cache: torch.Tensor, index: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        cache.index_copy_(0, index, torch.neg(x))
        return x.sum()

    cache, index, x = torch.zeros(4, 3), torch.tensor([1, 3]), torch.randn(2, 3)
    with ib.faults.doubling_neg():
        report = ib.check_accuracy(write, cache, index, x)
    assert report.passed is False and [o.path for o in report.failing] == ["['updated']['input 0']"], report.render()
    assert torch.equal(cache, torch.zeros(4, 3))


def test_a_torch_module_that_updates_its_buffers_is_compiled_and_judged(tmp_path):
    """A target that updates tensors in place is called through ``Effects``, whose own frame
    Dynamo skips. For a module of torch's own code (``nn.Sequential`` of torch layers) Dynamo then
    compiled nothing at all: a batch norm in training mode was "no bug found" with "graphs checked:
    none", whatever its kernels computed."""
    import instrumented_backend as ib

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU()).train()
    x = torch.randn(4, 3, 10, 10)
    clean = ib.diagnose(model, x, minify=False, progress=False, out_dir=tmp_path)
    assert clean.verdict == "passed" and clean.graphs, clean.render()
    assert "1.running_mean" in clean.effects
    with ib.faults.scaled("rsqrt", 1.01):
        faulty = ib.diagnose(model, x, minify=False, progress=False, out_dir=tmp_path)
    assert faulty.verdict == "inaccurate" and faulty.divergence.culprit == "rsqrt", faulty.render()
    # the line is batch norm's own, not the diagnosis's frame that calls the module
    sources = {line.source.file.rsplit("/", 1)[-1] for line in faulty.culprit_lines if line.source}
    assert sources == {"batchnorm.py"}, faulty.render()
