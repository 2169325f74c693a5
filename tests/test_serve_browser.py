"""`torchcode serve` in a real browser (headless Chromium driven by Selenium): a learner solves a problem
entirely in the page. Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs them)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="torchcode serve needs the 'serve' extra (in the 'test' extra): pip install -e '.[test]'")
pytest.importorskip("selenium", reason="the browser tests need selenium (in the 'test' extra): pip install -e '.[test]'")

from conftest import FIXTURES  # noqa: E402
from serving import start_server, stop_server  # noqa: E402

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
DRIVERS = ("chromedriver", "/usr/lib/chromium/chromedriver", "/usr/bin/chromedriver")

WRONG = '''import torch


def repeat_kv(x, n_rep):
    B, S, H, D = x.shape
    return x.repeat(1, 1, n_rep, 1)
'''
FIX = "return x[:, :, :, None, :].expand(B, S, H, n_rep, D).reshape(B, S, H * n_rep, D)"


def _find(names) -> str | None:
    for n in names:
        p = shutil.which(n) or (n if os.path.isabs(n) and os.access(n, os.X_OK) else None)
        if p:
            return p
    return None


@pytest.fixture(scope="module")
def browser():
    chromium, driver = _find(BROWSERS), _find(DRIVERS)
    if not (chromium and driver):
        missing = " and ".join(n for n, p in (("chromium", chromium), ("chromedriver", driver)) if not p)
        why = (f"BROWSER TESTS NOT RUN: {missing} not found. Install them: "
               "apt-get install -y chromium chromium-driver (Debian/Ubuntu)")
        if os.environ.get("CI"):
            pytest.fail(why + " (CI must run the browser tests: .ci/run installs them)")
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1000", "--no-first-run", "--disable-extensions"):
        opts.add_argument(arg)
    d = webdriver.Chrome(service=Service(executable_path=driver), options=opts)
    d.set_page_load_timeout(60)
    yield d
    d.quit()


@pytest.fixture
def served(tmp_path):
    folder = tmp_path / "ws"
    folder.mkdir()
    s = start_server(folder, folder / "home")  # the progress store inside the folder, as README's demo has it
    yield s
    assert stop_server(s) == 130, "".join(s.output)


def _wait(driver, cond, timeout=30, what="the page"):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(lambda d: cond(d), message=f"waiting for {what}")


def _report(driver, timeout=240):
    """The report of the check in flight, once it is there: (verdict, text)."""
    from selenium.webdriver.common.by import By

    el = _wait(driver, lambda d: d.find_elements(By.ID, "report-text") or d.find_elements(By.CSS_SELECTOR, "#progress .error"),
               timeout, "the check's report")[0]
    assert el.get_attribute("id") == "report-text", el.text
    return el.get_attribute("data-verdict"), el.text


def test_solve_a_problem_in_the_browser(browser, served):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.common.action_chains import ActionChains

    d = browser
    d.get(served.url)  # the printed URL: token -> cookie, then the list
    _wait(d, lambda d: d.current_url.rstrip("/") == served.base, what="the redirect to the list")
    row = d.find_element(By.ID, "row-repeat_kv")
    assert row.get_attribute("data-status") == "todo"
    assert "Next up: repeat_kv" in d.find_element(By.ID, "next-up").text
    row.find_element(By.LINK_TEXT, "repeat_kv").click()

    _wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, ".CodeMirror"), what="the editor")
    assert "Repeat KV Heads" in d.find_element(By.TAG_NAME, "h1").text
    d.find_element(By.ID, "start").click()
    path = served.folder / "repeat_kv.py"
    _wait(d, lambda d: path.exists() and "raise NotImplementedError" in _editor(d), what="the stub in the editor")
    assert _editor(d) == path.read_text()

    # the wrong solution goes in as a paste, and Ctrl-Enter checks it
    d.execute_script("window.torchcodeEditor.setValue(arguments[0]); window.torchcodeEditor.focus();", WRONG)
    ActionChains(d).key_down(Keys.CONTROL).send_keys(Keys.ENTER).key_up(Keys.CONTROL).perform()
    _wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#progress li.case") or d.find_elements(By.ID, "report-text"),
          120, "per-case progress")
    verdict, text = _report(d)
    assert verdict == "wrong_answer", text
    assert "Wrong answer" in text and "expected" in text and "got" in text and "max abs err" in text
    assert "seed " in text
    assert path.read_text() == WRONG  # what was graded is the file on disk

    # the fix is typed, key by key, over the return line; then the Check button
    d.execute_script("const cm = window.torchcodeEditor; const n = cm.lineCount() - 2;"
                     "cm.setSelection({line: n, ch: 4}, {line: n, ch: cm.getLine(n).length}); cm.focus();")
    ActionChains(d).send_keys(FIX).perform()
    _wait(d, lambda d: FIX in _editor(d), what="the typed fix")
    _wait(d, lambda d: d.find_element(By.ID, "check").text == "Check", what="the Check button back")
    assert _editor(d).splitlines()[-1] == "    " + FIX  # brackets closed as typed, not doubled
    d.find_element(By.ID, "check").click()
    assert not d.find_elements(By.ID, "report-text")  # the last report goes at once
    verdict, text = _report(d)
    assert verdict == "accepted", text
    assert "Accepted" in text and "All hidden cases pass" in text
    assert path.read_text().splitlines()[-1] == "    " + FIX
    _wait(d, lambda d: "solved" in d.find_element(By.ID, "solved-badge").text, what="the solved badge")
    assert d.find_element(By.ID, "next-link").text == "sdpa"  # the suggested next problem

    # a change on disk (the learner's own editor) shows in the page
    path.write_text(path.read_text() + "# edited elsewhere\n")
    _wait(d, lambda d: "# edited elsewhere" in _editor(d), 10, "the change on disk in the editor")

    d.find_element(By.CSS_SELECTOR, 'nav.tabs button[data-tab="attempts"]').click()
    rows = d.find_elements(By.CSS_SELECTOR, "#attempts tr")
    assert [r.find_elements(By.TAG_NAME, "td")[1].text for r in rows] == ["accepted", "wrong answer"]

    d.get(served.base + "/")
    row = d.find_element(By.ID, "row-repeat_kv")
    assert row.get_attribute("data-status") == "solved" and "solved" in row.text
    assert "Next up: sdpa" in d.find_element(By.ID, "next-up").text
    db = sqlite3.connect(served.home / "progress.sqlite3")
    assert db.execute("SELECT verdict FROM attempts ORDER BY id").fetchall() == [("wrong_answer",), ("accepted",)]
    assert not d.get_log("browser") or all(e["level"] != "SEVERE" for e in d.get_log("browser"))

    # the file checked twice in a row: the server started the next check's worker ahead. The editor saves by
    # renaming a new file over the old one, which that worker (the store in this folder: it reads the file by
    # inode) cannot read: it must not be used (the check was a runtime error, "Permission denied")
    row.find_element(By.LINK_TEXT, "repeat_kv").click()
    _wait(d, lambda d: "# edited elsewhere" in _editor(d), what="the editor again")
    inode = path.stat().st_ino
    d.execute_script("window.torchcodeEditor.setValue(window.torchcodeEditor.getValue() + '# saved here\\n');")
    d.find_element(By.ID, "check").click()
    verdict, text = _report(d)
    assert verdict == "accepted", text
    assert path.read_text().endswith("# saved here\n") and path.stat().st_ino != inode  # saved by rename


def test_stop_a_running_check_then_a_file_that_is_not_utf8(browser, served):
    from selenium.webdriver.common.by import By

    d = browser
    (served.folder / "sdpa.py").write_text(
        "import time\n\n\ndef scaled_dot_product_attention(Q, K, V, mask=None):\n    time.sleep(3)\n    return Q\n")
    d.get(served.url.replace("/?", "/p/sdpa?"))
    _wait(d, lambda d: "time.sleep" in _editor(d), what="the file in the editor")
    d.find_element(By.ID, "check").click()
    _wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#progress li.case"), 120, "a case running")
    assert d.find_element(By.ID, "check").text == "Stop"
    d.find_element(By.ID, "check").click()
    _wait(d, lambda d: "Stopped" in d.find_element(By.ID, "progress").text, 10, "the stop")
    assert d.find_element(By.ID, "check").text == "Check"
    time.sleep(4)  # had it not been stopped, the case would have ended by now and the check been recorded
    from torchcode.progress import Store

    assert Store(served.home / "progress.sqlite3").attempts() == []
    assert not d.find_elements(By.ID, "report-text")

    # then (on this server, its grading session warm) a file that is not UTF-8: UTF-16 (PowerShell's `>`) is
    # shown read-only with the way out, typing changes nothing on disk, Convert to UTF-8 keeps a backup and
    # makes it editable; a declared Latin-1 file is edited and saved in Latin-1
    from selenium.webdriver.common.action_chains import ActionChains

    path = served.folder / "repeat_kv.py"
    path.write_bytes(WRONG.encode("utf-16"))
    d.get(served.url.replace("/?", "/p/repeat_kv?"))
    _wait(d, lambda d: "x.repeat(1, 1, n_rep, 1)" in _editor(d), what="the UTF-16 file, read")
    note = d.find_element(By.ID, "encoding-note")
    assert note.is_displayed() and "UTF-16" in note.text, note.text
    d.execute_script("window.torchcodeEditor.focus();")
    ActionChains(d).send_keys("# typed\n").perform()
    time.sleep(1.5)  # a save would have happened by now (600 ms after typing)
    assert "# typed" not in _editor(d) and path.read_bytes() == WRONG.encode("utf-16")
    d.find_element(By.ID, "convert").click()
    _wait(d, lambda d: path.read_bytes() == WRONG.encode(), what="the file converted to UTF-8")
    _wait(d, lambda d: not d.find_element(By.ID, "encoding-note").is_displayed(), what="the note gone")
    assert [b.read_bytes() for b in served.folder.glob("repeat_kv.py.bak-*")] == [WRONG.encode("utf-16")]
    assert "kept as repeat_kv.py.bak-" in d.find_element(By.ID, "save-state").text

    latin = "# -*- coding: latin-1 -*-\n# caf\u00e9\n" + WRONG
    path.write_bytes(latin.encode("latin-1"))  # from the learner's own editor: the page reloads it
    _wait(d, lambda d: "# caf\u00e9" in _editor(d), 10, "the Latin-1 file in the editor")
    assert "is in latin-1, as its coding line declares" in d.find_element(By.ID, "encoding-note").text
    d.execute_script("window.torchcodeEditor.setValue(arguments[0]);", latin + "# ol\u00e9\n")
    _wait(d, lambda d: path.read_bytes() == (latin + "# ol\u00e9\n").encode("latin-1"), 10, "the save, in Latin-1")
    assert not d.get_log("browser") or all(e["level"] != "SEVERE" for e in d.get_log("browser"))


def test_hints_solution_and_math_in_the_browser(browser, served):
    from selenium.webdriver.common.by import By

    d = browser
    d.get(served.url.replace("/?", "/p/sdpa?"))
    _wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, ".CodeMirror"), what="the editor")
    d.find_element(By.CSS_SELECTOR, 'nav.tabs button[data-tab="hints"]').click()
    d.find_element(By.ID, "hint-next").click()
    _wait(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#hints .hint")) == 1, what="hint 1")
    db = sqlite3.connect(served.home / "progress.sqlite3")
    assert db.execute("SELECT revealed FROM hints WHERE problem = 'sdpa'").fetchone() == (1,)
    d.find_element(By.CSS_SELECTOR, 'nav.tabs button[data-tab="solution"]').click()
    d.find_element(By.ID, "solution-show").click()
    _wait(d, lambda d: "not solved" in d.find_element(By.ID, "solution-gate").text, what="the gate")
    assert d.find_element(By.ID, "solution").get_attribute("hidden") is not None
    d.find_element(By.ID, "solution-show").click()
    _wait(d, lambda d: "def scaled_dot_product_attention" in d.find_element(By.ID, "solution").text, what="the solution")
    assert not d.find_elements(By.CSS_SELECTOR, ".katex")  # no math here: KaTeX is not even loaded
    assert d.execute_script("return typeof katex") == "undefined"


def test_math_in_a_statement_is_typeset_from_the_package(browser, tmp_path):
    """A pack whose statement has TeX: KaTeX (shipped in torchcode/web/static/) typesets it."""
    from selenium.webdriver.common.by import By

    pack = tmp_path / "pack"
    (pack / "problems").mkdir(parents=True)
    shutil.copytree(FIXTURES / "course_pack" / "problems" / "good_attention", pack / "problems" / "good_attention")
    (pack / "solutions").mkdir()
    (pack / "templates").mkdir()
    shutil.copy(FIXTURES / "course_pack" / "solutions" / "good_attention.py", pack / "solutions")
    shutil.copy(FIXTURES / "course_pack" / "templates" / "good_attention.py.j2", pack / "templates")
    statement = pack / "problems" / "good_attention" / "statement.md"
    statement.write_text(statement.read_text() + "\n```math\n\\operatorname{softmax}\\left(\\frac{QK^\\top}{\\sqrt{D}}\\right)V\n```\n\n"
                         "Row $i$ weights value $v_j$ by $a_i b_j$.\n")
    (tmp_path / "ws").mkdir()
    s = start_server(tmp_path / "ws", tmp_path / "home", "--problems-dir", str(pack))
    try:
        d = browser
        d.get(s.url.replace("/?", "/p/good_attention?"))
        _wait(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".statement .katex")) == 4, what="KaTeX output")
        assert len(d.find_elements(By.CSS_SELECTOR, ".statement .katex-display")) == 1
        assert not d.find_elements(By.CSS_SELECTOR, ".statement em")  # a_i b_j is math, not emphasis
        assert "softmax" in d.find_element(By.CSS_SELECTOR, ".katex-display").text
        fonts = d.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        assert all(u.startswith(s.base) for u in fonts), fonts  # nothing from the network
    finally:
        assert stop_server(s) == 130


def _editor(d) -> str:
    return d.execute_script("return window.torchcodeEditor.getValue()")
