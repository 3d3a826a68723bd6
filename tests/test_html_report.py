"""The HTML report: one offline file, every pane linked, checked with real clicks in headless Chromium.

Screenshots land in ``test-artifacts/`` (or ``$IB_ARTIFACTS``) for a person to look at.
"""

from __future__ import annotations

import inspect
import json
import os
import re
from pathlib import Path

import pytest
import torch
from browser import console_errors, start_browser
from conftest import REPO, foo1, tutorial_inputs

import instrumented_backend as ib

ARTIFACTS = Path(os.environ.get("IB_ARTIFACTS", REPO / "test-artifacts"))
NEG_SOURCE = "a = torch.neg(x1)"


def _page_data(text: str) -> dict:
    payload = re.search(r'<script id="report-data" type="application/json">(.*?)</script>', text, re.S).group(1)
    return json.loads(payload.replace("<\\/", "</"))


# ---------------------------------------------------------------- captures (compiled once)

@pytest.fixture(scope="module")
def tutorial(tmp_path_factory):
    torch.compiler.reset()
    with ib.capture() as session:
        torch.compile(foo1, backend="instrumented")(*tutorial_inputs())
    path = ib.report.html(session, tmp_path_factory.mktemp("html") / "tutorial.html")
    return session[0], path


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc(x))
        return torch.tanh(h) * x


@pytest.fixture(scope="module")
def training(tmp_path_factory):
    torch.compiler.reset()
    torch.manual_seed(0)
    model = _Block()
    with ib.capture() as session:
        compiled = torch.compile(model, backend="instrumented")
        compiled(torch.randn(8, 16, requires_grad=True)).sum().backward()
    path = ib.report.html(session, tmp_path_factory.mktemp("html") / "training.html")
    return session, path


@pytest.fixture(scope="module")
def compile_error(tmp_path_factory):
    torch.compiler.reset()
    with ib.capture() as session, ib.faults.cast_dropping_neg():
        with pytest.raises(Exception):
            torch.compile(foo1, backend="instrumented")(*tutorial_inputs())
    path = ib.report.html(session, tmp_path_factory.mktemp("html") / "compile_error.html")
    return session[-1], path


# ---------------------------------------------------------------- the file itself (no browser)

def test_the_report_is_one_offline_file_with_every_pane(tutorial):
    capture, path = tutorial
    text = path.read_text()
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', text), "the page must not load anything"
    data = _page_data(text)
    [page] = data["graphs"]
    for pane in page["panes"]:
        for line in pane["lines"]:
            line[1] = [page["ids"][i] for i in line[1]]
    assert [pane["key"] for pane in page["panes"]] == ["source", "dynamo", "post_grad", "ir", "code"]
    panes = {pane["key"]: pane["lines"] for pane in page["panes"]}
    neg_kernel_lines = [line for line in panes["code"] if "p:neg" in line[1]]
    assert {line[3] for line in neg_kernel_lines} == {capture.kernels[0].name, "call"}  # the kernel and its launch
    [source_line] = [line for line in panes["source"] if NEG_SOURCE in re.sub("<[^>]+>", "", line[0])]
    assert source_line[1] == [f"s:{Path(__file__).resolve().parent / 'conftest.py'}:{source_line[2]}"]
    assert source_line[1][0] in page["relations"]["p:neg"], "neg's relations reach its source line"
    assert any("p:neg" in line[1] for line in panes["post_grad"])
    assert any("d:a" in line[1] for line in panes["dynamo"])


def test_the_report_reads_a_dump_folder_and_the_cli_writes_it(tutorial, tmp_path):
    from instrumented_backend.cli import main

    capture, _ = tutorial
    capture.dump(tmp_path / "dump")
    out = tmp_path / "from_cli.html"
    assert main(["html", str(tmp_path / "dump"), "-o", str(out)]) == 0
    data = _page_data(out.read_text())
    assert data["graphs"][0]["label"] == capture.label
    with pytest.raises(TypeError, match="expected a capture session"):
        ib.report.html(42, tmp_path / "bad.html")


def test_without_pygments_the_lines_are_plain_escaped_text(monkeypatch):
    from instrumented_backend.report import highlight

    monkeypatch.setattr(highlight, "pygments_available", lambda: False)
    assert highlight.highlight_lines("x = a < b\ny", "python") == ["x = a &lt; b", "y"]


# ---------------------------------------------------------------- in the browser

@pytest.fixture(scope="module")
def browser():
    driver = start_browser()
    yield driver
    driver.quit()


def _open(browser, path: Path) -> None:
    browser.get(path.resolve().as_uri())
    assert browser.execute_script("return document.documentElement.dataset.ready") == "1"


def _line(browser, pane: str, text: str):
    from selenium.webdriver.common.by import By

    for element in browser.find_elements(By.CSS_SELECTOR, f"#pane-{pane} .ln"):
        if text in element.get_attribute("textContent"):
            return element
    raise AssertionError(f"no line with {text!r} in pane {pane}")


def _click(browser, element) -> None:
    """A real click, after scrolling the line to the middle of its pane and of the window (as a
    reader would: the sticky header must not cover it)."""
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    element.click()


def _linked(browser, pane: str) -> list[str]:
    from selenium.webdriver.common.by import By

    return [e.get_attribute("textContent") for e in
            browser.find_elements(By.CSS_SELECTOR, f"#pane-{pane} .ln.linked, #pane-{pane} .ln.clicked")]


def _shot(browser, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def test_clicking_the_neg_kernel_line_lights_its_source_and_post_grad_node_and_back(browser, tutorial):
    capture, path = tutorial
    _open(browser, path)
    [neg_line] = [line for line in capture.kernels[0].lines if "neg" in line.fx_nodes and "ops.neg" in line.ir_ops]
    _click(browser, _line(browser, "code", neg_line.text.strip()))
    assert any(NEG_SOURCE in text for text in _linked(browser, "source"))
    assert any("torch.ops.aten.neg.default" in text for text in _linked(browser, "post_grad"))
    assert any("torch.neg(" in text for text in _linked(browser, "dynamo"))
    _shot(browser, "report_tutorial_neg_kernel_line")

    _click(browser, _line(browser, "source", NEG_SOURCE))  # and back: the source line lights the kernel line
    assert any(neg_line.text.strip() in text for text in _linked(browser, "code"))
    assert not any("maximum" in text and "torch.ops" in text for text in _linked(browser, "post_grad"))
    assert console_errors(browser) == []


def test_search_and_keyboard_walk_the_linked_lines(browser, tutorial):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    _, path = tutorial
    _open(browser, path)
    box = browser.find_element(By.ID, "search")
    box.send_keys("neg", Keys.ENTER)
    assert _linked(browser, "code") and _linked(browser, "post_grad")
    browser.find_element(By.TAG_NAME, "body").send_keys("j")
    assert len(browser.find_elements(By.CSS_SELECTOR, ".ln.clicked")) == 1
    assert console_errors(browser) == []


def test_a_backward_kernel_line_links_to_the_forward_source_line(browser, training):
    session, path = training
    backward = session.by_kind("backward")[0]
    _open(browser, path)
    browser.execute_script("window.ibReport.select(arguments[0])", session.graphs.index(backward))
    relu_grad = [line for kernel in backward.kernels for line in kernel.lines
                 if any(n.startswith(("le", "threshold_backward", "where")) for n in line.fx_nodes)
                 and line.source is not None]
    assert relu_grad, "the backward graph has a kernel line for relu's gradient with a source line"
    _click(browser, _line(browser, "code", relu_grad[0].text.strip()))
    linked = _linked(browser, "source")
    assert any("torch.relu(self.fc(x))" in text for text in linked), linked
    _shot(browser, "report_training_backward_line")
    assert console_errors(browser) == []


def test_the_compile_error_report_highlights_the_failing_line(browser, compile_error):
    capture, path = compile_error
    assert capture.failed and capture.compile_error_report is not None
    [failing] = [item.line for item in capture.compile_error_report.lines if item.role == "error"]
    _open(browser, path)
    from selenium.webdriver.common.by import By

    errors = browser.find_elements(By.CSS_SELECTOR, "#pane-code .ln.error")
    assert [e.get_attribute("data-n") for e in errors] == [str(failing.number)]
    assert "clicked" in errors[0].get_attribute("class"), "the failing line is selected when the page opens"
    assert any(NEG_SOURCE in text or "torch.maximum" in text for text in _linked(browser, "source"))
    sections = browser.find_element(By.ID, "graph").text
    assert "Compile error, explained" in sections
    _shot(browser, "report_compile_error")
    assert console_errors(browser) == []


def test_the_diagnose_report_opens_on_its_verdict_tables_and_repro(browser, tmp_path):
    """``diagnose`` writes report.html: it showed the first diverging kernel only, not the verdict,
    the outputs against eager, the failing layer or the repro that diagnosis.txt gives. They now
    open the page, above the kernel's section (whose lines the page links)."""
    from selenium.webdriver.common.by import By

    torch.compiler.reset()
    with ib.faults.doubling_neg():
        result = ib.diagnose(foo1, *tutorial_inputs(), out_dir=tmp_path)
    path = Path(result.reports["html"])
    titles = [s["title"] for s in _page_data(path.read_text())["sections"]]
    assert titles[:2] == ["Diagnosis: the compiled outputs are wrong", "First diverging kernel"], titles
    _open(browser, path)
    [first, *_] = browser.find_elements(By.CSS_SELECTOR, "#run-sections .diag")
    shown = first.text
    assert "Diagnosis: the compiled outputs are wrong" in shown and "error" in first.get_attribute("class")
    assert "outputs against eager (fp64 referee)" in shown and "first failing layer: inductor" in shown
    assert f"run it: {result.repro_command}" in shown and NEG_SOURCE in shown
    assert "its kernel, the culprit and its lines" not in shown  # that part is the next section's
    _shot(browser, "report_diagnosis")
    assert console_errors(browser) == []


def test_profile_and_divergence_add_their_overlay_and_sections(tmp_path):
    """A profile colours kernels and source lines by their share; the first diverging kernel of
    the tutorial's doubling-neg bug gets its section, pointing at the culprit's kernel lines."""
    x1, x2 = tutorial_inputs(torch.float32)
    torch.compiler.reset()
    report = ib.profile(foo1, x1, x2, warmup=2, iters=4, active=2, bandwidth=False)
    data = _page_data(ib.report.html(report.captures, tmp_path / "profiled.html", profile=report).read_text())
    kernels = data["graphs"][0]["kernels"]
    assert kernels and all(k["share"] is not None and 0 < k["share"] <= 1 for k in kernels)
    first = inspect.getsourcelines(foo1)[1]  # the def line; its body's ops are the next lines
    assert any(source.endswith((f":{first + 2}", f":{first + 3}")) for source in data["sourceShares"])
    assert any(s["title"] == "Profile: eager vs compiled" and "speed-up" in s["text"] for s in data["sections"])

    with ib.faults.doubling_neg():
        torch.compiler.reset()
        divergence = ib.find_first_divergence(foo1, x1, x2)
    assert divergence.found
    data = _page_data(ib.report.html(ib.last_capture(), tmp_path / "divergence.html", divergence=divergence)
                      .read_text())
    [section] = [s for s in data["sections"] if s["title"] == "First diverging kernel"]
    assert section["kind"] == "error" and "neg" in section["text"]
    assert section["lines"] == sorted({line.number for line in divergence.lines}) and section["lines"]


def _breaks_and_recompiles(x, n):
    y = torch.sin(x) * 2
    print("a graph break")
    return torch.cos(y) + n


def test_the_index_says_why_each_graph_was_compiled(tmp_path):
    torch.compiler.reset()
    with ib.capture() as session:
        compiled = torch.compile(_breaks_and_recompiles, backend="instrumented")
        compiled(torch.randn(4), 1)
        compiled(torch.randn(4, 4), 2)  # another rank: the frame recompiles
    by_id = {g.compile_id: g for g in session}
    assert "print" in by_id["0/0"].graph_break_reason or "builtin" in by_id["0/0"].graph_break_reason
    print_line = _breaks_and_recompiles.__code__.co_firstlineno + 2
    assert by_id["0/0"].graph_break_reason.endswith(f"{Path(__file__).name}:{print_line})")
    assert "rank" in by_id["0/1"].recompile_reason and by_id["0/0"].recompile_reason == ""
    data = _page_data(ib.report.html(session, tmp_path / "why.html").read_text())
    summaries = {g["summary"]["compile_id"]: g["summary"] for g in data["graphs"]}
    assert summaries["0/1"]["recompile"] == by_id["0/1"].recompile_reason
    assert summaries["0/0"]["graph_break"] == by_id["0/0"].graph_break_reason


def test_a_graph_that_failed_before_its_nodes_were_mapped_shows_the_lines_it_was_traced_from():
    """A compile that fails before lowering (an InductorError in a dynamic-shape SegFormer's layout
    code) has no node map: its source pane said "no user source lines are known (a graph traced
    from a string or REPL)". The Dynamo graph's printed code names each node's line: those show."""
    from types import SimpleNamespace

    from instrumented_backend.report.page import _source_pane

    here = Path(__file__).resolve()
    line = _breaks_before_any_op.__code__.co_firstlineno + 2
    printed = (f"class GraphModule(torch.nn.Module):\n    def forward(self, L_x_):\n"
               f"        # File: {here}:{line} in _breaks_before_any_op, code: return torch.sin(x) * 2\n"
               "        sin = torch.sin(L_x_)\n")
    pane = _source_pane(SimpleNamespace(nodes={}, failed=True, dynamo_graph_code=printed))
    assert "traced from" in pane.note and "REPL" not in pane.note
    assert [row.ids for row in pane.lines if row.gutter == str(line)] == [[f"s:{here}:{line}"]]
    assert "No user source" in _source_pane(SimpleNamespace(nodes={}, failed=False, dynamo_graph_code=printed)).note


def _breaks_before_any_op(x):
    torch._dynamo.graph_break()  # ends an empty graph: no backend receives it
    return torch.sin(x) * 2


def test_a_break_that_ends_an_empty_graph_is_not_named_as_the_next_graphs():
    """A break before the frame traced any op ends an empty graph, which no backend receives: its
    reason was left over, and the next graph compiled (here the resumed frame, under a DDP forward
    the module's own graph) was named as ended by it: a profile then said "1 graphs at 1 break"."""
    torch.compiler.reset()
    with ib.capture() as session:
        torch.compile(_breaks_before_any_op, backend="instrumented")(torch.randn(4))
        torch.compile(_breaks_and_recompiles, backend="instrumented")(torch.randn(4), 1)
    first, *rest = list(session)
    assert first.graph_break_reason == "" and "sin" in first.dynamo_graph_code
    print_line = _breaks_and_recompiles.__code__.co_firstlineno + 2
    ended = [g for g in rest if g.graph_break_reason]
    assert len(ended) == 1 and ended[0].graph_break_reason.endswith(f"{Path(__file__).name}:{print_line})")


def test_a_distributed_runs_graphs_are_told_apart_by_rank(browser, tutorial, tmp_path):
    """Every rank of a torch.distributed run has its own #0: the report of a two-rank dump listed
    #0 twice, with nothing to tell the rows apart, and headed both graphs alike. A rank column
    and the heading's rank say whose each is."""
    import copy

    from selenium.webdriver.common.by import By

    graph, _ = tutorial
    ranks = []
    for rank in (0, 1):
        mine = copy.copy(graph)
        mine.rank, mine.world_size = rank, 2
        ranks.append(mine)
    path = ib.report.html(ranks, tmp_path / "ranks.html")
    _open(browser, path)
    headers = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#graphs th")]
    assert headers[:2] == ["rank", "#"], headers
    rows = browser.find_elements(By.CSS_SELECTOR, "#graphs tr.graph-row")
    assert [row.find_elements(By.TAG_NAME, "td")[0].text for row in rows] == ["0", "1"]
    _click(browser, rows[1])
    heading = [h.text for h in browser.find_elements(By.TAG_NAME, "h2") if h.text.startswith("Graph ")]
    assert heading == [f"Graph {graph.label} on rank 1"], heading
    assert console_errors(browser) == []
    plain = _page_data(ib.report.render_html(graph))  # one process: no rank column, the label as it was
    assert plain["graphs"][0]["label"] == graph.label and plain["graphs"][0]["summary"]["rank"] is None


def test_the_browser_leaves_no_profile_folder_behind():
    driver = start_browser()
    profile = Path(driver.capabilities["chrome"]["userDataDir"])
    assert profile.is_dir() and profile.name.startswith("ib-chromium-")
    driver.quit()
    assert not profile.exists()
