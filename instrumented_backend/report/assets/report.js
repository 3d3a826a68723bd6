// instrumented-backend report: draws one graph at a time from the JSON in #report-data and links
// lines across panes by their ids (p:<post-grad node>, d:<Dynamo node>, s:<file>:<line>).
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("report-data").textContent);
  var state = { graph: -1, page: null, index: {}, reverse: {}, linked: [], cursor: -1, kernel: -1 };

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function sectionElement(section) {
    var box = el("div", "diag " + (section.kind || "info"));
    box.appendChild(el("h2", "", section.title));
    box.appendChild(el("pre", "", section.text));
    if (section.graph !== null && section.graph !== undefined) {
      var show = el("button", "", section.lines.length ? "show the lines in the output code" : "show the graph");
      show.addEventListener("click", function () {
        select(graphPosition(section.graph));
        if (section.lines.length) linkNumbers("code", section.lines);
      });
      box.appendChild(show);
    }
    return box;
  }

  function graphPosition(index) {
    for (var i = 0; i < DATA.graphs.length; i++) if (DATA.graphs[i].index === index) return i;
    return 0;
  }

  function renderIndex() {
    var table = document.getElementById("graphs");
    var head = el("tr");
    // a rank column for a distributed run's graphs (two ranks' #0 are two graphs), a bucket column under DDP
    var ranked = DATA.graphs.some(function (page) { return page.summary.rank !== null && page.summary.rank !== undefined; });
    var bucketed = DATA.graphs.some(function (page) {
      return page.summary.ddp_bucket !== null && page.summary.ddp_bucket !== undefined;
    });
    var headers = (ranked ? ["rank"] : []).concat(["#", "compile id", "kind"], bucketed ? ["ddp bucket"] : [],
      ["Dynamo / AOT / post-grad nodes", "kernels", "status", "accuracy", "compile s", "inputs", "why compiled", "problems"]);
    headers.forEach(function (h) { head.appendChild(el("th", "", h)); });
    table.appendChild(head);
    function shown(value) { return value === null || value === undefined ? "" : value; }
    DATA.graphs.forEach(function (page, position) {
      var s = page.summary, n = s.nodes || {};
      var row = el("tr", "graph-row");
      row.dataset.graph = String(position);
      var note = s.compile_id && /\/[1-9]/.test(s.compile_id) ? " (recompile)" : "";
      var why = [s.recompile ? "recompiled: " + s.recompile : "", s.graph_break ? "ended by a graph break: " + s.graph_break : ""]
        .filter(Boolean).join("; ");
      var values = (ranked ? [shown(s.rank)] : []).concat([page.index, (s.compile_id || "?") + note, s.kind],
        bucketed ? [shown(s.ddp_bucket)] : [],
        [[n.dynamo, n.aot, n.post_grad].map(function (v) { return v === undefined ? "-" : v; }).join(" / "),
         s.kernels, s.status, s.accuracy || "", s.compile_seconds, s.inputs, why, s.problems.join("; ")]);
      values.forEach(function (value, column) {
        var header = headers[column];
        var cell = el("td", header === "status" ? "status-" + s.status : (header === "accuracy" && value === "FAILED" ? "bad" : ""), value);
        if (header === "why compiled") cell.className = "why";
        if (header === "inputs" && s.inputs_all && s.inputs_all !== s.inputs) {  // dozens of inputs: the rest on request
          cell.textContent = "";
          var more = el("details", "inputs");
          more.appendChild(el("summary", "", s.inputs));
          more.appendChild(el("div", "", s.inputs_all));
          more.addEventListener("click", function (event) { event.stopPropagation(); });
          cell.appendChild(more);
        }
        row.appendChild(cell);
      });
      row.addEventListener("click", function () { select(position); });
      table.appendChild(row);
    });
    var sections = document.getElementById("run-sections");
    DATA.sections.forEach(function (section) { sections.appendChild(sectionElement(section)); });
  }

  function heat(share) {
    if (!share) return "";
    var alpha = Math.max(0.15, Math.min(1, share * 2));
    return ' style="background: rgba(251,143,68,' + alpha.toFixed(2) + ')" title="' + (share * 100).toFixed(1) + '% of kernel time"';
  }

  function paneHtml(pane, page) {
    var shares = {};
    page.kernels.forEach(function (k) { if (k.share) shares[k.name] = k.share; });
    var starts = {};
    page.kernels.forEach(function (k) { starts[k.line] = true; });
    var parts = [];
    for (var i = 0; i < pane.lines.length; i++) {
      var line = pane.lines[i], ids = line[1], gutter = line[2], kernel = line[3];
      var classes = "ln" + (ids.length ? "" : " untracked") + (line[4] ? " error" : "") +
        (pane.key === "code" && starts[Number(gutter)] ? " kstart" : "");
      var share = pane.key === "code" ? shares[kernel] : pane.key === "source" && ids.length ? DATA.sourceShares[ids[0]] : 0;
      parts.push('<div class="' + classes + '" data-i="' + i + '" data-n="' + gutter + '"' +
        (kernel ? ' data-kernel="' + kernel + '"' : "") + '><span class="g">' + gutter + '</span><span class="heat"' +
        heat(share) + '></span><span class="t">' + (line[0] || " ") + "</span></div>");
    }
    return parts.join("");
  }

  function select(position) {
    if (position === state.graph) return;
    var page = DATA.graphs[position];
    if (!page.resolved) {  // line ids arrive as numbers into page.ids
      page.panes.forEach(function (pane) {
        pane.lines.forEach(function (line) { line[1] = line[1].map(function (i) { return page.ids[i]; }); });
      });
      page.resolved = true;
    }
    state.graph = position; state.page = page; state.linked = []; state.cursor = -1; state.kernel = -1;
    state.index = {}; state.reverse = {};
    Array.prototype.forEach.call(document.querySelectorAll("#graphs tr.graph-row"), function (row) {
      row.classList.toggle("current", Number(row.dataset.graph) === position);
    });
    Object.keys(page.relations).forEach(function (p) {
      page.relations[p].forEach(function (other) { (state.reverse[other] = state.reverse[other] || []).push(p); });
    });
    var main = document.getElementById("graph");
    main.textContent = "";
    main.appendChild(el("h2", "", "Graph " + page.label));
    page.sections.forEach(function (section) { main.appendChild(sectionElement(section)); });
    if (page.kernels.some(function (k) { return k.share; })) main.appendChild(kernelTable(page));
    var grid = el("div", "panes");
    page.panes.forEach(function (pane) {
      var box = el("div", "pane " + pane.key + (pane.key === "code" || pane.key === "ir" ? " wide" : " half"));
      box.id = "pane-" + pane.key;
      box.appendChild(el("h3", "", pane.title));
      if (pane.note) box.appendChild(el("div", "note", pane.note));
      var lines = el("div", "lines");
      lines.innerHTML = paneHtml(pane, page);
      lines.addEventListener("click", function (event) {
        var target = event.target.closest(".ln");
        if (target) clickLine(pane.key, Number(target.dataset.i));
      });
      box.appendChild(lines);
      grid.appendChild(box);
      pane.lines.forEach(function (line, i) {
        line[1].forEach(function (id) { (state.index[id] = state.index[id] || []).push([pane.key, i]); });
      });
    });
    main.appendChild(grid);
    var errors = [];
    page.panes.forEach(function (pane) {
      if (pane.key === "code") pane.lines.forEach(function (line, i) { if (line[4]) errors.push(i); });
    });
    if (errors.length) clickLine("code", errors[0]);
    status(page.label + ": " + page.kernels.length + " kernel(s)");
  }

  function kernelTable(page) {
    var box = el("div", "diag info");
    box.appendChild(el("h2", "", "Kernel time (share of the profiled compiled step)"));
    var table = el("table");
    page.kernels.slice().sort(function (a, b) { return (b.share || 0) - (a.share || 0); }).forEach(function (k) {
      var row = el("tr");
      row.appendChild(el("td", "", k.name));
      var cell = el("td", "", ((k.share || 0) * 100).toFixed(1) + "%");
      var bar = el("span", "share");
      bar.style.width = Math.round((k.share || 0) * 200) + "px";
      cell.appendChild(bar);
      row.appendChild(cell);
      table.appendChild(row);
    });
    box.appendChild(table);
    return box;
  }

  function paneLines(key) { return document.querySelector("#pane-" + key + " .lines"); }
  function lineElement(key, i) { var box = paneLines(key); return box ? box.children[i] : null; }

  function expand(ids) {
    var all = {};
    ids.forEach(function (id) {
      all[id] = true;
      var related = id.indexOf("p:") === 0 ? (state.page.relations[id] || []) : (state.reverse[id] || []);
      related.forEach(function (other) {
        all[other] = true;
        if (other.indexOf("p:") === 0) (state.page.relations[other] || []).forEach(function (x) { all[x] = true; });
      });
    });
    return Object.keys(all);
  }

  function clearLinks() {
    Array.prototype.forEach.call(document.querySelectorAll(".ln.linked, .ln.clicked"), function (node) {
      node.classList.remove("linked"); node.classList.remove("clicked");
    });
    state.linked = []; state.cursor = -1;
  }

  function highlight(ids, clicked) {
    clearLinks();
    var seen = {};
    ids.forEach(function (id) {
      (state.index[id] || []).forEach(function (where) {
        var key = where[0] + ":" + where[1];
        if (seen[key]) return;
        seen[key] = true;
        var node = lineElement(where[0], where[1]);
        if (node) { node.classList.add("linked"); state.linked.push({ pane: where[0], i: where[1], node: node }); }
      });
    });
    var order = Object.keys(DATA.panes);
    state.linked.sort(function (a, b) { return order.indexOf(a.pane) - order.indexOf(b.pane) || a.i - b.i; });
    if (clicked) clicked.node.classList.add("clicked");
    order.forEach(function (key) {
      if (clicked && key === clicked.pane) return;
      var first = state.linked.filter(function (x) { return x.pane === key; })[0];
      if (first) scrollTo(first.pane, first.node);
    });
    status(state.linked.length + " linked line(s)" + (ids.length ? " for " + ids.slice(0, 6).join(", ") : ""));
  }

  function scrollTo(key, node) {
    var box = paneLines(key);
    if (box && node) box.scrollTop = node.offsetTop - box.offsetTop - box.clientHeight / 3;
  }

  function clickLine(key, i) {
    var pane = state.page.panes.filter(function (p) { return p.key === key; })[0];
    var line = pane && pane.lines[i];
    if (!line) return;
    var node = lineElement(key, i);
    highlight(line[1].length ? expand(line[1]) : [], { pane: key, i: i, node: node });
    if (node) scrollTo(key, node);
  }

  function linkNumbers(key, numbers) {
    var ids = [];
    numbers.forEach(function (n) {
      var node = paneLines(key).querySelector('.ln[data-n="' + n + '"]');
      if (node) ids = ids.concat(state.page.panes.filter(function (p) { return p.key === key; })[0].lines[Number(node.dataset.i)][1]);
    });
    highlight(expand(ids), null);
    numbers.forEach(function (n) {
      var node = paneLines(key).querySelector('.ln[data-n="' + n + '"]');
      if (node) { node.classList.add("clicked"); scrollTo(key, node); }
    });
  }

  function search(query) {
    query = query.trim();
    if (!query || !state.page) { clearLinks(); return; }
    var ids = [];
    if (state.index["p:" + query]) ids.push("p:" + query);
    if (state.index["d:" + query]) ids.push("d:" + query);
    var spot = /^(.*?):?(\d+)$/.exec(query);
    if (!ids.length && spot) {
      Object.keys(state.index).forEach(function (id) {
        if (id.indexOf("s:") !== 0) return;
        var at = id.lastIndexOf(":"), file = id.slice(2, at), line = id.slice(at + 1);
        if (line === spot[2] && (!spot[1] || file === spot[1] || file.slice(-spot[1].length - 1) === "/" + spot[1])) ids.push(id);
      });
    }
    if (ids.length) { highlight(expand(ids), null); return; }
    clearLinks();
    var lower = query.toLowerCase();
    state.page.panes.forEach(function (pane) {
      pane.lines.forEach(function (line, i) {
        var node = lineElement(pane.key, i);
        if (node && node.textContent.toLowerCase().indexOf(lower) >= 0) {
          node.classList.add("linked"); state.linked.push({ pane: pane.key, i: i, node: node });
        }
      });
    });
    if (state.linked.length) scrollTo(state.linked[0].pane, state.linked[0].node);
    status(state.linked.length + " line(s) contain \u201c" + query + "\u201d");
  }

  function moveLinked(step) {
    if (!state.linked.length) return;
    state.cursor = (state.cursor + step + state.linked.length) % state.linked.length;
    var target = state.linked[state.cursor];
    Array.prototype.forEach.call(document.querySelectorAll(".ln.clicked"), function (n) { n.classList.remove("clicked"); });
    target.node.classList.add("clicked");
    scrollTo(target.pane, target.node);
  }

  function moveKernel(step) {
    var kernels = state.page ? state.page.kernels.slice().sort(function (a, b) { return a.line - b.line; }) : [];
    if (!kernels.length) return;
    state.kernel = (state.kernel + step + kernels.length) % kernels.length;
    var node = paneLines("code").querySelector('.ln[data-n="' + kernels[state.kernel].line + '"]');
    if (node) { scrollTo("code", node); status("kernel " + kernels[state.kernel].name); }
  }

  function status(text) {
    var box = document.getElementById("status");
    if (!box) { box = el("span"); box.id = "status"; document.querySelector("header").appendChild(box); }
    box.textContent = text;
  }

  document.getElementById("search").addEventListener("keydown", function (event) {
    if (event.key === "Enter") search(event.target.value);
    if (event.key === "Escape") { event.target.value = ""; clearLinks(); }
    event.stopPropagation();
  });
  document.addEventListener("keydown", function (event) {
    if (event.target && event.target.tagName === "INPUT") return;
    if (event.key === "n") moveKernel(1);
    else if (event.key === "p") moveKernel(-1);
    else if (event.key === "j") moveLinked(1);
    else if (event.key === "k") moveLinked(-1);
    else if (event.key === "Escape") clearLinks();
  });

  renderIndex();
  if (DATA.graphs.length) {
    var failing = DATA.graphs.findIndex(function (g) { return g.summary.status === "failed"; });
    select(failing >= 0 ? failing : 0);
  } else {
    document.getElementById("graph").appendChild(el("p", "", "No graphs were captured: nothing was compiled while capturing. A function compiled before a capture() " +
      "block runs its cached code inside it; call torch.compiler.reset() first, or compile inside the block."));
  }
  window.ibReport = { select: select, search: search, ready: true, readyMs: performance.now() };
  document.documentElement.dataset.ready = "1";
})();
