// The problem page: the editor on DIR/<id>.py, Check with live per-case progress, hints, solution.
// Text that comes from the learner's code or a grade is always set with textContent, never as HTML;
// the one HTML the server sends (the report) is rich's escaped export.
"use strict";

(function () {
  const data = JSON.parse(document.getElementById("data").textContent);
  const $ = (id) => document.getElementById(id);
  const base = "/api/p/" + encodeURIComponent(data.id);
  let file = data.file;          // what we last know is on disk: {exists, path, text, sha, editable, note}
  let dirty = false;             // the editor has text not yet saved
  let applying = false;          // the editor is being set from disk, not typed in
  let saveTimer = null;
  let saving = null;             // the save in flight (a promise)
  let checking = false;
  let stopper = null;           // aborts the check in flight (the server then cancels it)
  let epoch = 0;                 // bumped by every save, load and check: a poll answer from before is stale

  async function api(method, url, body) {
    const opts = {method, headers: {"X-Torchcode": "1"}, credentials: "same-origin"};
    if (body !== undefined) {
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    const r = await fetch(url, opts);
    let payload = {};
    try { payload = await r.json(); } catch (e) { /* empty answer */ }
    return {status: r.status, ok: r.ok, body: payload};
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // -- math ------------------------------------------------------------------------------------
  let katexLoading = null;
  function loadKatex() {  // only pages with math pay for KaTeX
    if (!katexLoading) {
      katexLoading = new Promise((resolve, reject) => {
        const css = document.createElement("link");
        css.rel = "stylesheet";
        css.href = "/static/katex/katex.min.css";
        document.head.append(css);
        const js = document.createElement("script");
        js.src = "/static/katex/katex.min.js";
        js.onload = resolve;
        js.onerror = reject;
        document.head.append(js);
      });
    }
    return katexLoading;
  }

  function typeset(root) {
    const spans = root.querySelectorAll("span.math");
    if (!spans.length) return;
    if (!window.katex) { loadKatex().then(() => typeset(root), () => {}); return; }
    spans.forEach((span) => {
      if (span.dataset.done) return;
      try {
        katex.render(span.textContent, span, {displayMode: span.classList.contains("display"), throwOnError: false});
        span.dataset.done = "1";
      } catch (e) { /* leave the TeX as text */ }
    });
  }

  // -- editor ----------------------------------------------------------------------------------
  const editor = CodeMirror($("editor"), {
    value: file.text, mode: "python", lineNumbers: true, indentUnit: 4, tabSize: 4, indentWithTabs: false,
    matchBrackets: true, autoCloseBrackets: true, readOnly: !file.exists || file.editable === false, viewportMargin: Infinity,
    extraKeys: {
      "Ctrl-Enter": () => check(), "Cmd-Enter": () => check(),
      "Ctrl-S": () => saveNow(), "Cmd-S": () => saveNow(),
      "Ctrl-/": "toggleComment", "Cmd-/": "toggleComment",
      Tab: (cm) => cm.somethingSelected() ? cm.indentSelection("add") : cm.replaceSelection("    ", "end"),
      "Shift-Tab": (cm) => cm.indentSelection("subtract"),
    },
  });
  window.torchcodeEditor = editor;  // for tests and the curious

  function showFile() {
    $("file-name").textContent = file.exists ? file.path : file.path + " (not started)";
    $("start").hidden = file.exists;
    $("reset").hidden = !file.exists;
    $("check").disabled = !file.exists;
    $("check").classList.toggle("stop", checking);
    editor.setOption("readOnly", !file.exists || file.editable === false);
    // a file that is not UTF-8: what it is, and (when the editor cannot save it as it is) the way out
    const note = $("encoding-note");
    note.replaceChildren();
    note.hidden = !(file.exists && file.note);
    if (note.hidden) return;
    note.append(el("span", "", file.note));
    if (file.editable === false) {
      const b = el("button", "", "Convert to UTF-8");
      b.id = "convert";
      b.onclick = convert;
      note.append(b);
    }
  }

  async function convert() {
    const r = await api("POST", base + "/convert", {sha: file.sha});
    if (r.status === 409) loadFromDisk(r.body.file, "reloaded: changed on disk");
    else if (!r.ok) setState(r.body.error || "could not convert", "bad");
    else loadFromDisk(r.body.file, r.body.backup ? "converted to UTF-8; your file is kept as " + r.body.backup : "saved");
  }

  function setState(text, cls) {
    const s = $("save-state");
    s.textContent = text;
    s.className = "saved " + (cls || "");
  }

  function loadFromDisk(f, why) {
    epoch++;
    file = f;
    applying = true;
    const cursor = editor.getCursor();
    editor.setValue(f.text);
    editor.setCursor(cursor);
    applying = false;
    dirty = false;
    showFile();
    setState(why || "saved");
  }

  editor.on("change", () => {
    if (applying) return;
    dirty = true;
    setState("editing…");
    clearTimeout(saveTimer);
    saveTimer = setTimeout(saveNow, 600);
  });

  // Save the editor's text; true when it is on disk (false: a clash with the disk, or an error, shown)
  async function saveNow() {
    clearTimeout(saveTimer);
    while (saving) await saving;
    if (!dirty || !file.exists) return !dirty;
    const text = editor.getValue();
    epoch++;
    let ok = false;
    saving = (async () => {
      const r = await api("PUT", base + "/file", {text, sha: file.sha});
      if (r.status === 409) {
        conflict(r.body.file);
      } else if (!r.ok) {
        setState("not saved: " + (r.body.error || r.status), "bad");
      } else {
        file = r.body;
        ok = true;
        if (editor.getValue() === text) { dirty = false; setState("saved"); }
        hideNote();
      }
    })();
    try { await saving; } finally { saving = null; }
    return ok;
  }

  // -- a change on disk (the learner's own editor, `torchcode reset`) shows here ----------------
  function conflict(disk) {
    const note = $("disk-note");
    note.replaceChildren(el("span", "", file.path + " changed on disk while you were editing here. "));
    const take = el("button", "", "Load the disk version");
    take.onclick = () => { loadFromDisk(disk, "loaded from disk"); hideNote(); };
    const keep = el("button", "", "Keep mine (overwrite the disk)");
    keep.onclick = () => { file = disk; dirty = true; hideNote(); saveNow(); };
    note.append(take, keep);
    note.hidden = false;
    setState("not saved", "bad");
  }

  function hideNote() { $("disk-note").hidden = true; }

  async function poll() {
    if (document.hidden || saving || checking) return;
    const seen = epoch;
    const r = await api("GET", base + "/file");
    if (!r.ok || seen !== epoch || saving || checking) return;  // stale: the page moved on meanwhile
    const disk = r.body;
    if (disk.sha === file.sha && disk.exists === file.exists) return;
    if (!dirty) loadFromDisk(disk, disk.exists ? "reloaded: changed on disk" : "");
    else if (disk.exists) conflict(disk);
  }
  setInterval(poll, 1000);

  $("start").onclick = async () => {
    const r = await api("POST", base + "/start", {});
    if (r.ok) loadFromDisk(r.body.file, "started");
    else setState(r.body.error || "could not start", "bad");
  };

  let resetArmed = false;
  $("reset").onclick = async () => {
    if (!resetArmed) {
      resetArmed = true;
      $("reset").textContent = "Really reset? (a backup is kept)";
      setTimeout(() => { resetArmed = false; $("reset").textContent = "Reset"; }, 4000);
      return;
    }
    resetArmed = false;
    $("reset").textContent = "Reset";
    const r = await api("POST", base + "/reset", {});
    if (r.ok) loadFromDisk(r.body.file, r.body.backup ? "reset; your file is kept as " + r.body.backup : "reset");
    else setState(r.body.error || "could not reset", "bad");
  };

  // -- check -----------------------------------------------------------------------------------
  async function check() {
    if (checking || !file.exists) return;
    const progress = $("progress");
    const report = $("report");
    report.replaceChildren();  // at once: the last report is not this check's
    progress.replaceChildren(el("div", "running", dirty ? "Saving…" : "Starting the grader…"));
    if (dirty && !(await saveNow())) {  // what is graded is the file: the editor's text goes there first
      progress.replaceChildren(el("div", "error", "Not checked: your text could not be saved (see above)."));
      return;
    }
    if (checking) return;
    checking = true;
    epoch++;
    showFile();
    $("check").textContent = "Stop";
    progress.replaceChildren(el("div", "running", "Starting the grader…"));
    const lines = {};
    try {
      stopper = new AbortController();
      await stream(base + "/check", {gpu_dry_run: $("gpu-dry-run").checked}, (ev) => onEvent(ev, progress, report, lines), stopper.signal);
    } catch (e) {
      if (e.name === "AbortError") {
        progress.replaceChildren(el("div", "error", "Stopped: the check was cancelled and nothing was recorded."));
        return;
      }
      progress.replaceChildren(el("div", "error", e.status ? e.message : "the connection to torchcode serve was lost: " + e));
    } finally {
      checking = false;
      stopper = null;
      $("check").textContent = "Check";
      showFile();
    }
  }
  $("check").onclick = () => (stopper ? stopper.abort() : check());

  function onEvent(ev, progress, report, lines) {
    if (ev.event === "started") {
      progress.replaceChildren(el("div", "running", "Running " + (ev.cases ? ev.cases.length : "the") + " hidden cases" +
        (ev.dtypes ? " in " + ev.dtypes.join(", ") : "") + "…"));
      progress.append(el("ol", "cases"));
    } else if (ev.event === "case") {
      let list = progress.querySelector("ol.cases");
      if (!list) { list = el("ol", "cases"); progress.append(list); }
      const key = ev.name + "/" + (ev.dtype || "");
      const li = el("li", "case running", ev.name + (ev.dtype ? " (" + ev.dtype + ")" : "") + " …");
      li.dataset.name = ev.name;
      lines[key] = li;
      lines[ev.name] = li;
      list.append(li);
      const head = progress.querySelector(".running");
      if (head && ev.total) head.textContent = "Case " + (ev.index + 1) + " of " + ev.total + ": " + ev.name;
    } else if (ev.event === "case_done") {
      const li = lines[ev.name + "/" + (ev.dtype || "")] || lines[ev.name];
      if (li) {
        li.className = "case " + (ev.verdict === "accepted" ? "pass" : "fail");
        li.textContent = (ev.verdict === "accepted" ? "✓ " : "✗ ") + ev.name + (ev.dtype ? " (" + ev.dtype + ")" : "") +
          ": " + ev.verdict.replace(/_/g, " ");
      }
    } else if (ev.event === "report") {
      progress.replaceChildren();
      const pre = document.createElement("pre");
      pre.className = "report " + (ev.report.passed ? "accepted" : "rejected");
      pre.id = "report-text";
      pre.dataset.verdict = ev.report.verdict;
      pre.innerHTML = ev.html;  // rich's export: every character of the report is escaped
      report.replaceChildren(pre);
      if (ev.warning) report.append(el("p", "warning", "warning: " + ev.warning));
      if (ev.next) {
        const p = el("p", "next", "Next up: ");
        const a = el("a", "", ev.next);
        a.href = "/p/" + encodeURIComponent(ev.next);
        a.id = "next-link";
        p.append(a);
        report.append(p);
      }
      if (ev.report.passed) {
        $("solved-badge").textContent = "solved";
        $("solved-badge").className = "status solved";
        data.solved = true;
      }
      loadAttempts();
    } else if (ev.event === "error" || ev.event === "cancelled") {
      progress.replaceChildren(el("div", "error", ev.message));
    }
  }

  // -- hints, attempts, solution ---------------------------------------------------------------
  function showHints(hints, total) {
    const box = $("hints");
    box.replaceChildren();
    hints.forEach((h, i) => {
      const d = el("div", "hint");
      d.append(el("h3", "", "Hint " + (i + 1) + " of " + total));
      const body = el("div");
      body.innerHTML = h;  // rendered by the server from the problem's Markdown, raw HTML escaped
      d.append(body);
      box.append(d);
      typeset(d);
    });
    $("hint-count").textContent = "(" + hints.length + "/" + total + ")";
    $("hint-next").disabled = hints.length >= total;
    $("hint-next").textContent = hints.length >= total ? "That was the last hint" : "Reveal hint " + (hints.length + 1);
  }
  $("hint-next").onclick = async () => {
    const r = await api("POST", base + "/hint", {});
    if (r.ok) showHints(r.body.hints, r.body.hints_total);
  };

  function ago(t) {
    const s = Date.now() / 1000 - t;
    if (s < 60) return "just now";
    if (s < 3600) return Math.floor(s / 60) + " min ago";
    if (s < 86400) return Math.floor(s / 3600) + " h ago";
    return Math.floor(s / 86400) + " d ago";
  }
  function showAttempts(rows) {
    const body = $("attempts");
    body.replaceChildren();
    for (const a of rows) {
      const tr = el("tr", a.verdict === "accepted" ? "pass" : "fail");
      tr.append(el("td", "", ago(a.at)), el("td", "", a.verdict.replace(/_/g, " ")),
        el("td", "", a.passed + "/" + a.total), el("td", "", a.seconds.toFixed(2) + " s"), el("td", "", String(a.seed)));
      body.append(tr);
    }
    if (!rows.length) {
      const tr = el("tr");
      tr.append(el("td", "meta", "No check yet."));
      body.append(tr);
    }
  }
  async function loadAttempts() {
    const r = await api("POST", base + "/attempts", {});
    if (r.ok) showAttempts(r.body);
  }

  async function solution(confirm) {
    const r = await api("POST", base + "/solution", {confirm});
    if (!r.ok) { $("solution-gate").textContent = r.body.error || "cannot show the solution"; return; }
    if (r.body.gated) {
      $("solution-gate").textContent = r.body.message;
      $("solution-show").textContent = "Show it anyway";
      $("solution-show").onclick = () => solution(true);
      return;
    }
    $("solution-gate").textContent = "";
    $("solution-show").hidden = true;
    const pre = $("solution");
    pre.hidden = false;
    CodeMirror.runMode ? CodeMirror.runMode(r.body.source, "python", pre) : (pre.textContent = r.body.source);
  }
  $("solution-show").onclick = () => solution(false);

  // -- bench: time and peak memory against the size, drawn as two log-log charts -------------------
  const SERIES = [["learner", "yours", "#1f6feb"], ["reference", "reference", "#8a8f98"], ["baseline", "fused kernel", "#23863a"]];

  function svg(tag, attrs, text) {
    const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function chart(title, rows, key, unit, scale) {
    const W = 520, H = 260, L = 62, R = 110, T = 28, B = 40;
    const pts = SERIES.map(([k, label, color]) => ({label, color,
      xy: rows.filter((r) => r[k + key] > 0).map((r) => [r.size, r[k + key] * scale])}));
    const xs = rows.map((r) => r.size);
    const ys = pts.flatMap((p) => p.xy.map((q) => q[1]));
    if (!ys.length) return el("p", "meta", "no " + title.toLowerCase() + " measured");
    const lx = (v) => Math.log10(v);
    const [x0, x1] = [lx(Math.min(...xs)), lx(Math.max(...xs)) || lx(Math.min(...xs)) + 1];
    const [y0, y1] = [Math.floor(lx(Math.min(...ys))), Math.ceil(lx(Math.max(...ys))) || 1];
    const px = (v) => L + (x1 === x0 ? 0.5 : (lx(v) - x0) / (x1 - x0)) * (W - L - R);
    const py = (v) => H - B - (y1 === y0 ? 0.5 : (lx(v) - y0) / (y1 - y0)) * (H - T - B);
    const g = svg("svg", {viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": title});
    g.append(svg("text", {x: L, y: 16, class: "title"}, title + " (" + unit + ", log scale)"));
    for (let e = y0; e <= y1; e++) {
      const y = py(10 ** e);
      g.append(svg("line", {x1: L, x2: W - R, y1: y, y2: y, class: "grid"}));
      g.append(svg("text", {x: L - 6, y: y + 4, class: "tick", "text-anchor": "end"}, String(+(10 ** e).toPrecision(3))));
    }
    for (const x of xs) {
      g.append(svg("line", {x1: px(x), x2: px(x), y1: T, y2: H - B, class: "grid"}));
      g.append(svg("text", {x: px(x), y: H - B + 16, class: "tick", "text-anchor": "middle"}, String(x)));
    }
    g.append(svg("text", {x: (L + W - R) / 2, y: H - 6, class: "tick", "text-anchor": "middle"}, "size"));
    pts.map((p, i) => [p, i]).reverse().forEach(([p, i]) => {  // yours drawn last, on top
      if (!p.xy.length) return;
      g.append(svg("polyline", {points: p.xy.map(([x, y]) => px(x) + "," + py(y)).join(" "), fill: "none",
        stroke: p.color, "stroke-width": i === 0 ? 2.5 : 1.5, "data-series": SERIES[i][0]}));
      p.xy.forEach(([x, y]) => g.append(svg("circle", {cx: px(x), cy: py(y), r: 3, fill: p.color})));
      g.append(svg("text", {x: W - R + 8, y: T + 14 + 16 * i, fill: p.color, class: "legend"}, p.label));
    });
    return g;
  }

  function showBench(b) {
    const box = $("bench-charts");
    box.replaceChildren(chart("Time", b.rows, "_s", "ms", 1000), chart("Peak memory", b.rows, "_peak", "MB", 1 / 2 ** 20));
    const t = $("bench-table");
    t.replaceChildren();
    const head = el("tr");
    ["size", "yours", "reference", "fused", "yours / ref", "your peak", "ref peak", "fused peak"].forEach((h) => head.append(el("th", "", h)));
    t.append(head);
    const ms = (v) => (v == null ? "-" : (v * 1000).toFixed(2) + " ms");
    const mb = (v) => (v == null ? "-" : (v / 2 ** 20).toFixed(1) + " MB");
    for (const r of b.rows) {
      const tr = el("tr");
      [String(r.size), ms(r.learner_s), ms(r.reference_s), ms(r.baseline_s), r.ratio.toFixed(2) + "x",
        mb(r.learner_peak), mb(r.reference_peak), mb(r.baseline_peak)].forEach((v) => tr.append(el("td", "", v)));
      t.append(tr);
    }
    t.hidden = false;
    $("bench-state").textContent = b.device + ", " + b.dtype + ", median of " + b.reps;
  }

  if ($("bench-run")) $("bench-run").onclick = async () => {
    $("bench-run").disabled = true;
    $("bench-state").textContent = "benchmarking (grading first, then timing every size: this takes a while)…";
    $("bench-charts").replaceChildren();
    try {
      await stream(base + "/bench", {}, (ev) => {
        if (ev.event === "bench") showBench(ev.bench);
        else if (ev.event === "error" || ev.event === "cancelled") {
          $("bench-state").textContent = "";
          $("bench-charts").replaceChildren(el("p", "error", ev.message));
        }
      });
    } catch (e) {
      $("bench-charts").replaceChildren(el("p", "error", String(e)));
    } finally {
      $("bench-run").disabled = false;
    }
  };

  // POST, then call onEvent for each line of the NDJSON answer; an answer that is not a stream throws
  async function stream(url, body, onEvent, signal) {
    const resp = await fetch(url, {method: "POST", credentials: "same-origin", signal,
      headers: {"X-Torchcode": "1", "Content-Type": "application/json"}, body: JSON.stringify(body)});
    if (!resp.ok) {
      let b = {};
      try { b = await resp.json(); } catch (e) { /* */ }
      const err = new Error(b.error || ("the server answered " + resp.status));
      err.status = resp.status;
      err.body = b;
      throw err;
    }
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buf += decoder.decode(value, {stream: true});
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (line.trim()) onEvent(JSON.parse(line));
      }
    }
  }

  document.querySelectorAll("nav.tabs button").forEach((b) => {
    b.onclick = () => {
      document.querySelectorAll("nav.tabs button").forEach((x) => x.classList.toggle("active", x === b));
      document.querySelectorAll(".tab").forEach((t) => { t.hidden = t.id !== "tab-" + b.dataset.tab; });
    };
  });

  showFile();
  setState(file.exists ? "" : "press Start to write the stub to " + file.path);
  showHints(data.hints, data.hints_total);
  showAttempts(data.attempts);
  typeset(document.querySelector(".statement"));
  window.addEventListener("beforeunload", () => { if (dirty) saveNow(); });
})();
