"""`torchcode serve` over plain HTTP, against a real running server: who may talk to it, and what it does
with the learner's files and progress (the browser flow itself is in test_serve_browser.py)."""

from __future__ import annotations

import shutil
import sqlite3
import time

import pytest
from conftest import ROOT

pytest.importorskip("starlette", reason="torchcode serve needs the 'serve' extra (in the 'test' extra): pip install -e '.[test]'")
pytest.importorskip("uvicorn", reason="torchcode serve needs the 'serve' extra (in the 'test' extra): pip install -e '.[test]'")

from serving import start_server, stop_server  # noqa: E402


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ws")
    home = tmp_path_factory.mktemp("home")
    s = start_server(folder, home)
    yield s
    assert stop_server(s) == 130, "".join(s.output)  # Ctrl-C, as everywhere in the CLI
    assert "torchcode serve stopped" in "".join(s.output)


# -- who may talk to it ------------------------------------------------------------------------------

def test_bound_to_loopback_only(served):
    out = "".join(served.output)
    assert served.url.startswith("http://127.0.0.1:") and "token=" in served.url
    assert "WARNING" not in out
    import socket

    for addr in _other_addresses():  # the same port on this machine's other addresses answers nothing
        with socket.socket() as s:
            s.settimeout(1)
            assert s.connect_ex((addr, served.port)) != 0, f"serve answers on {addr}"


def _other_addresses() -> list[str]:
    import socket

    try:
        return [a for a in socket.gethostbyname_ex(socket.gethostname())[2] if not a.startswith("127.")]
    except OSError:
        return []


@pytest.mark.parametrize("path", ["/", "/p/sdpa", "/api/problems", "/api/p/sdpa/file", "/static/app/problem.js",
                                  "/static/codemirror/codemirror.js"])
def test_every_request_needs_the_token(served, path):
    status, _, body = served.request("GET", path, auth=False)
    assert status == 401, (path, status)
    assert "token" in body["error"]
    status, _, _ = served.request("GET", path, auth=False, headers={"Authorization": "Bearer not-the-token"})
    assert status == 401
    status, _, _ = served.request("GET", path, auth=False,
                                  headers={"Cookie": f"torchcode_token_{served.port}=not-the-token"})
    assert status == 401
    status, _, _ = served.request("GET", path)  # the bearer token
    assert status == 200, path


def test_bad_token_in_the_url_is_refused(served):
    status, headers, _ = served.request("GET", "/?token=" + served.token[:-1] + "x", auth=False)
    assert status == 401 and "set-cookie" not in headers
    status, headers, _ = served.request("GET", "/?token=", auth=False)
    assert status == 401 and "set-cookie" not in headers


def test_token_in_the_url_becomes_a_strict_httponly_cookie(served):
    status, headers, _ = served.request("GET", "/p/sdpa?token=" + served.token, auth=False)
    assert status == 303 and headers["location"] == "/p/sdpa"  # the token leaves the address bar
    cookie = headers["set-cookie"]
    assert cookie.startswith(f"torchcode_token_{served.port}={served.token};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    status, _, body = served.request("GET", "/p/sdpa", auth=False, headers={"Cookie": cookie.split(";")[0]})
    assert status == 200 and "Scaled Dot-Product Attention" in body


def test_a_token_does_not_make_a_foreign_host_acceptable(served):
    """DNS rebinding: a page on evil.example, re-pointed at 127.0.0.1, reaches us with its own Host."""
    for host in (f"evil.example:{served.port}", "evil.example", f"127.0.0.1.evil.example:{served.port}",
                 "127.0.0.1", f"localhost:{served.port + 1}"):
        status, _, body = served.request("GET", "/api/problems", headers={"Host": host})
        assert status == 403, host
        assert "Host" in body["error"]
    for host in (f"localhost:{served.port}", f"[::1]:{served.port}", f"LOCALHOST:{served.port}"):
        assert served.request("GET", "/api/problems", headers={"Host": host})[0] == 200, host


def test_foreign_origin_is_refused_even_with_the_token(served):
    (served.folder / "sdpa.py").unlink(missing_ok=True)
    for origin in ("http://evil.example", "null", f"http://127.0.0.1:{served.port + 1}",
                   f"https://127.0.0.1:{served.port}"):
        for method, path, body in (("GET", "/api/p/sdpa/file", None), ("POST", "/api/p/sdpa/start", {}),
                                   ("POST", "/api/p/sdpa/check", {})):
            status, headers, answer = served.request(method, path, body=body, headers={"Origin": origin})
            assert status == 403, (origin, method, path)
            assert "access-control-allow-origin" not in headers
    assert not (served.folder / "sdpa.py").exists()  # nothing was started
    status, _, _ = served.request("POST", "/api/p/sdpa/attempts", body={}, headers={"Origin": served.base})
    assert status == 200  # its own pages' Origin is fine


def test_changes_need_the_custom_header_and_no_cors_is_ever_offered(served):
    """A cross-site form can POST with the cookie in old browsers but cannot add a header."""
    status, _, body = served.request("POST", "/api/p/sdpa/start", body={}, headers={"X-Torchcode": None})
    assert status == 403 and "X-Torchcode" in body["error"]
    assert not (served.folder / "sdpa.py").exists()
    status, headers, _ = served.request("OPTIONS", "/api/p/sdpa/check", headers={
        "Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
    assert status == 403 and not any(h.startswith("access-control-") for h in headers)
    status, headers, _ = served.request("GET", "/")
    assert status == 200 and not any(h.startswith("access-control-") for h in headers)
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["x-frame-options"] == "DENY"


def test_nothing_outside_the_course_can_be_read(served):
    for path in ("/api/p/..%2f..%2fetc%2fpasswd/file", "/api/p/../../etc/passwd/file", "/static/../workspace.py",
                 "/static/..%2fworkspace.py", "/static/%2e%2e/app.py", "/p/..%2fetc"):
        status, _, body = served.request("GET", path)
        assert status == 404, (path, status)
        assert "root:" not in str(body) and "import" not in str(body)


# -- what it does --------------------------------------------------------------------------------

def test_list_and_problem_page(served):
    status, _, page = served.request("GET", "/")
    assert status == 200
    for pid in ("repeat_kv", "sdpa", "gqa", "minimind_attention"):
        assert f'href="/p/{pid}"' in page
    assert "Next up" in page
    status, _, page = served.request("GET", "/p/gqa")
    assert status == 200 and "Grouped-Query Attention" in page and "/static/codemirror/codemirror.js" in page
    status, _, page = served.request("GET", "/p/no_such_problem")
    assert status == 404 and "no problem named" in page


def test_a_folder_named_like_the_learners_file_is_said_not_a_server_error(served):
    """kv_cache.py in the folder is a folder: the page says so (it was a 500 and a traceback in the log), and so
    does Check."""
    (served.folder / "kv_cache.py").mkdir()
    try:
        status, _, page = served.request("GET", "/p/kv_cache")
        assert status == 409 and "kv_cache.py is a folder, not a file" in page, (status, page)
        status, _, answer = served.request("GET", "/api/p/kv_cache/file")
        assert status == 400 and "is a folder" in answer["error"], answer
        status, _, events = served.request("POST", "/api/p/kv_cache/check", body={})  # streamed: an error event
        assert events[-1]["event"] == "error" and "kv_cache.py is a folder, not a file" in events[-1]["message"], events
        status, _, answer = served.request("POST", "/api/p/kv_cache/check", body={"text": "# mine\n", "sha": ""})
        assert status == 400 and "is a folder" in answer["error"], answer
        assert "Traceback" not in "".join(served.output)
    finally:
        (served.folder / "kv_cache.py").rmdir()


def test_start_edit_and_disk_changes_meet_in_one_file(served):
    status, _, answer = served.request("POST", "/api/p/mha/start", body={})
    assert status == 200, answer
    path = served.folder / "mha.py"
    assert path.read_text() == answer["file"]["text"] and "class MultiHeadAttention" in answer["file"]["text"]
    sha = answer["file"]["sha"]
    status, _, saved = served.request("PUT", "/api/p/mha/file", body={"text": "# mine\n", "sha": sha})
    assert status == 200 and path.read_text() == "# mine\n"
    path.write_text("# from my own editor\n")  # a change on disk shows in the page
    status, _, now = served.request("GET", "/api/p/mha/file")
    assert now["text"] == "# from my own editor\n" and now["sha"] != saved["sha"]
    status, _, answer = served.request("PUT", "/api/p/mha/file", body={"text": "# stale page\n", "sha": saved["sha"]})
    assert status == 409 and answer["file"]["text"] == "# from my own editor\n"  # never overwritten blindly
    assert path.read_text() == "# from my own editor\n"
    status, _, answer = served.request("PUT", "/api/p/mha/file", body={"text": "x" * 1_100_000, "sha": now["sha"]})
    assert status == 400 and "KB" in answer["error"]


def test_a_text_no_file_can_hold_is_refused_not_a_server_error(served):
    status, _, answer = served.request("POST", "/api/p/rope/start", body={})
    assert status == 200, answer
    before = (served.folder / "rope.py").read_bytes()
    for method, path in (("PUT", "/api/p/rope/file"), ("POST", "/api/p/rope/check")):
        status, _, answer = served.request(method, path, body={"text": "x = '\ud800'\n"})  # a lone surrogate
        assert status == 400 and "cannot be saved" in answer["error"], answer
    assert (served.folder / "rope.py").read_bytes() == before
    assert "Traceback" not in "".join(served.output)


def test_a_body_that_is_not_a_json_object_is_a_400_never_a_server_error(served):
    for raw in (b"{", b"[1, 2]", b"\xff\xfe", b'{"a":' * 100_000):  # the last nests deeper than the parser goes
        status, _, answer = served.request("POST", "/api/p/sdpa/check", raw=raw)
        assert status == 400 and "JSON" in answer["error"], (raw[:20], status, answer)
    assert "Traceback" not in "".join(served.output)


def test_a_file_that_is_not_utf8_is_never_mangled_by_the_editor(served):
    """UTF-16 (PowerShell's `>`) and Latin-1 bytes without a coding line: shown read-only with what to do,
    a save refused, Convert to UTF-8 keeps the original as a backup. A declared encoding and a UTF-8 BOM are
    edited in place and written back as they were: only the edit changes bytes."""
    served.request("POST", "/api/p/cross_attention/start", body={})
    path = served.folder / "cross_attention.py"
    solution = (ROOT / "solutions" / "cross_attention.py").read_text()
    path.write_bytes(solution.encode("utf-16"))
    f = served.request("GET", "/api/p/cross_attention/file")[2]
    assert f["text"] == solution and f["editable"] is False and "UTF-16" in f["note"] and "Convert to UTF-8" in f["note"]
    for method, url in (("PUT", "/api/p/cross_attention/file"), ("POST", "/api/p/cross_attention/check")):
        status, _, answer = served.request(method, url, body={"text": solution + "# edited\n", "sha": f["sha"]})
        assert status == 400 and "UTF-16" in answer["error"], answer
        assert path.read_bytes() == solution.encode("utf-16")
    status, _, answer = served.request("POST", "/api/p/cross_attention/convert", body={"sha": f["sha"]})
    assert status == 200 and path.read_text(encoding="utf-8") == solution, answer
    assert (served.folder / answer["backup"]).read_bytes() == solution.encode("utf-16")
    assert answer["file"]["editable"] and answer["file"]["note"] is None

    path.write_bytes(b"# caf\xe9: Latin-1 from an old editor\nx = 1\n")  # no coding line: Python cannot read it
    f = served.request("GET", "/api/p/cross_attention/file")[2]
    assert f["text"].startswith("# caf\u00e9:") and not f["editable"] and "byte 0xe9 on line 1" in f["note"], f

    latin = "# -*- coding: latin-1 -*-\n# caf\u00e9\nx = 1\n"  # declared: Python reads it, so may the editor
    path.write_bytes(latin.encode("latin-1"))
    f = served.request("GET", "/api/p/cross_attention/file")[2]
    assert f["text"] == latin and f["editable"] and "coding line" in f["note"], f
    f = served.request("PUT", "/api/p/cross_attention/file", body={"text": latin + "y = 'ol\u00e9'\n", "sha": f["sha"]})[2]
    assert path.read_bytes() == (latin + "y = 'ol\u00e9'\n").encode("latin-1")
    status, _, answer = served.request("PUT", "/api/p/cross_attention/file", body={"text": latin + "z = '\u20ac'\n", "sha": f["sha"]})
    assert status == 400 and "cannot be saved in" in answer["error"] and "coding" in answer["error"], answer
    assert path.read_bytes() == (latin + "y = 'ol\u00e9'\n").encode("latin-1")
    utf8 = latin.replace("latin-1", "utf-8") + "z = '\u20ac'\n"  # the coding line changed in the editor: saved as it says
    assert served.request("PUT", "/api/p/cross_attention/file", body={"text": utf8, "sha": f["sha"]})[0] == 200
    assert path.read_bytes() == utf8.encode("utf-8")

    path.write_bytes(b"\xef\xbb\xbfx = 'caf\xc3\xa9'\n")  # a UTF-8 byte-order mark (Windows Notepad): kept
    f = served.request("GET", "/api/p/cross_attention/file")[2]
    assert f["text"] == "x = 'caf\u00e9'\n" and f["editable"] and f["note"] is None, f
    served.request("PUT", "/api/p/cross_attention/file", body={"text": "x = 'caf\u00e9!'\n", "sha": f["sha"]})
    assert path.read_bytes() == b"\xef\xbb\xbfx = 'caf\xc3\xa9!'\n"

    # UTF-8 whose coding line names an encoding Python does not know: said so (it was called "not UTF-8"), and
    # Convert makes the line say utf-8 (it wrote the same text back, still unreadable, with a new backup each press)
    odd = "#!/usr/bin/env python\n# vim: set fileencoding=klingon :\nx = 'caf\u00e9'\n"
    path.write_bytes(odd.encode("utf-8"))
    f = served.request("GET", "/api/p/cross_attention/file")[2]
    assert not f["editable"] and "'klingon', an encoding Python does not know" in f["note"], f
    status, _, answer = served.request("POST", "/api/p/cross_attention/convert", body={"sha": f["sha"]})
    assert status == 200 and answer["file"]["editable"], answer
    assert path.read_text(encoding="utf-8") == odd.replace("klingon", "utf-8")
    assert (served.folder / answer["backup"]).read_bytes() == odd.encode("utf-8")
    assert "Traceback" not in "".join(served.output)


def test_reset_keeps_a_backup(served):
    served.request("POST", "/api/p/rope/start", body={})
    (served.folder / "rope.py").write_text("# my attempt\n")
    status, _, answer = served.request("POST", "/api/p/rope/reset", body={})
    assert status == 200
    backup = served.folder / answer["backup"]
    assert backup.read_text() == "# my attempt\n"
    assert "def " in (served.folder / "rope.py").read_text()


def test_hints_are_revealed_one_at_a_time_and_recorded(served, cli):
    for n in (1, 2):
        status, _, answer = served.request("POST", "/api/p/sliding_window/hint", body={})
        assert status == 200 and len(answer["hints"]) == n
    db = sqlite3.connect(served.home / "progress.sqlite3")
    assert db.execute("SELECT revealed FROM hints WHERE problem = 'sliding_window'").fetchone() == (2,)
    status, _, page = served.request("GET", "/p/sliding_window")
    assert page.count("<p>") >= 1 and '"hints": [' in page.replace("\\u003c", "<")


def test_solution_is_gated_as_in_the_cli(served):
    status, _, answer = served.request("POST", "/api/p/linear_attention/solution", body={})
    assert status == 200 and answer["gated"] and "not solved" in answer["message"]
    assert "source" not in answer
    status, _, answer = served.request("POST", "/api/p/linear_attention/solution", body={"confirm": True})
    assert answer["source"] == (ROOT / "solutions" / "linear_attention.py").read_text()


def test_check_streams_cases_and_records_like_the_cli(served):
    """Through the warm session: the stub, then the reference; the store has both, as after `check`."""
    served.request("POST", "/api/p/repeat_kv/start", body={})
    status, headers, events = served.request("POST", "/api/p/repeat_kv/check", body={})
    assert status == 200 and "ndjson" in headers["content-type"], events
    assert events[-1]["event"] == "report", events[-1]
    assert events[-1]["report"]["verdict"] == "not_implemented"
    assert "Not implemented yet" in events[-1]["html"]
    text = (ROOT / "solutions" / "repeat_kv.py").read_text()
    sha = served.request("GET", "/api/p/repeat_kv/file")[2]["sha"]
    t0 = time.monotonic()
    status, _, events = served.request("POST", "/api/p/repeat_kv/check", body={"text": text, "sha": sha})
    kinds = [e["event"] for e in events]
    assert kinds[0] == "started" and "case" in kinds and "case_done" in kinds and kinds[-1] == "report", kinds
    done = [e for e in events if e["event"] == "case_done"]
    assert len(done) == len(events[0]["cases"]) * len(events[0]["dtypes"]) or len(done) >= len(events[0]["cases"])
    final = events[-1]
    assert final["report"]["verdict"] == "accepted" and "Accepted" in final["html"], final
    assert (served.folder / "repeat_kv.py").read_text() == text  # the editor's text was saved and graded
    rows = sqlite3.connect(served.home / "progress.sqlite3").execute(
        "SELECT verdict, file FROM attempts WHERE problem = 'repeat_kv' ORDER BY id").fetchall()
    assert [r[0] for r in rows] == ["not_implemented", "accepted"]
    assert rows[-1][1] == str(served.folder / "repeat_kv.py")
    listing = served.request("GET", "/api/problems")[2]
    row = next(p for p in listing["problems"] if p["id"] == "repeat_kv")
    assert row["status"] == "solved" and listing["suggestion"] != "repeat_kv"
    assert time.monotonic() - t0 < 120


def test_the_gpu_dry_run_box_gives_check_gpu_dry_runs_advice(served):
    """The page's "GPU dry run" box (off unless `serve --gpu-dry-run`) sends gpu_dry_run with the check."""
    assert served.request("GET", "/p/causal_attention")[0] == 200
    assert 'id="gpu-dry-run">' in served.request("GET", "/p/causal_attention")[2]  # not ticked: not asked for
    served.request("POST", "/api/p/causal_attention/start", body={})
    (served.folder / "causal_attention.py").write_text(
        (ROOT / "solutions" / "causal_attention.py").read_text().replace(", device=Q.device", ""))
    final = served.request("POST", "/api/p/causal_attention/check", body={"gpu_dry_run": True})[2][-1]
    assert final["report"]["verdict"] == "accepted" and len(final["report"]["advice"]) == 1, final
    assert "would fail on a GPU" in final["html"] and "line 11" in final["html"]
    final = served.request("POST", "/api/p/causal_attention/check", body={})[2][-1]
    assert final["report"]["verdict"] == "accepted" and final["report"]["advice"] == [], final


# -- the command itself -------------------------------------------------------------------------

def test_another_address_needs_an_explicit_flag_and_warns(cli, workdir):
    r = cli("serve", "--host", "0.0.0.0", "--no-browser", "--port", "0", timeout=60)
    assert r.code == 2 and "--allow-remote" in r.err and "Traceback" not in r.text
    r = cli("serve", str(workdir / "missing"), "--no-browser", timeout=60)
    assert r.code == 2 and "no such folder" in r.err
    r = cli("serve", "--device", "tpu", "--no-browser", timeout=60)
    assert r.code == 2 and "--device must be auto, cpu or cuda" in r.err


def test_allow_remote_prints_a_warning(tmp_path):
    (tmp_path / "ws").mkdir()
    s = start_server(tmp_path / "ws", tmp_path / "home", "--host", "0.0.0.0", "--allow-remote")
    try:
        out = "".join(s.output)
        assert "WARNING" in out and "run code" in out
        assert s.request("GET", "/api/problems")[0] == 200  # loopback still answers, with the token
        assert s.request("GET", "/api/problems", auth=False)[0] == 401
    finally:
        assert stop_server(s) == 130


def test_statement_markup_is_inert_and_keeps_math_whole():
    from torchcode.web.markup import statement_html

    out = statement_html("Weights $a_i b_j$, cost $5 and $6.\n\n$$\\sum_j w_{ij} = 1$$\n\n"
                         "<script>alert(1)</script> <img src=x onerror=alert(1)> [x](javascript:alert(1))\n\n"
                         "    code $y$ stays\n\n`$z$` too\n\n```math\n\\frac{a}{b} < c\n```\n")
    assert '<span class="math">a_i b_j</span>' in out and "<em>" not in out
    assert "cost $5 and $6" in out  # prices are not math
    assert '<span class="math display">\\sum_j w_{ij} = 1</span>' in out
    assert '<span class="math display">\\frac{a}{b} &lt; c</span>' in out
    assert "<script" not in out and "<img" not in out and 'href="javascript' not in out
    assert "code $y$ stays" in out and "<code>$z$</code>" in out


def test_bench_of_an_accepted_kernel_and_refusal_of_a_wrong_one(served):
    """`torchcode bench` behind the Benchmark tab: rows for the chart; a kernel that is not accepted gets none."""
    served.request("POST", "/api/p/causal_attention/start", body={})
    served.request("POST", "/api/p/causal_attention/reset", body={})  # the stub, whatever an earlier test left there
    status, _, events = served.request("POST", "/api/p/causal_attention/bench", body={})
    assert status == 200 and events[-1]["event"] == "error", events
    assert "not accepted" in events[-1]["message"] and "Traceback" not in events[-1]["message"]
    (served.folder / "causal_attention.py").write_text((ROOT / "solutions" / "causal_attention.py").read_text())
    status, _, events = served.request("POST", "/api/p/causal_attention/bench", body={})
    assert events[-1]["event"] == "bench", events
    rows = events[-1]["bench"]["rows"]
    assert [r["size"] for r in rows] == [256, 512, 1024]
    assert all(r["learner_s"] > 0 and r["reference_s"] > 0 and r["learner_peak"] > 0 for r in rows)
    page = served.request("GET", "/p/causal_attention")[2]
    assert 'data-tab="bench"' in page
    assert 'data-tab="bench"' not in served.request("GET", "/p/repeat_kv")[2]  # no benchmark defined there


def test_a_check_whose_page_goes_away_is_stopped_and_not_recorded(served):
    import http.client
    import json

    (served.folder / "sdpa.py").write_text(
        "import time\n\n\ndef scaled_dot_product_attention(Q, K, V, mask=None):\n    time.sleep(3)\n    return Q\n")
    served.request("POST", "/api/p/sdpa/start", body={})  # remembered as this folder's file (exists: kept)
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=120)
    conn.request("POST", "/api/p/sdpa/check", body=b"{}", headers={
        "Host": f"127.0.0.1:{served.port}", "Authorization": f"Bearer {served.token}", "X-Torchcode": "1",
        "Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 200
    while json.loads(r.readline())["event"] != "case":  # a case is running (sleeping) now
        pass
    conn.sock.shutdown(2)  # the page went away
    conn.close()
    t0 = time.monotonic()
    while True:  # the next check is not refused for long: the first one was stopped, not waited for
        status, _, events = served.request("POST", "/api/p/sdpa/check", body={
            "text": (ROOT / "solutions" / "sdpa.py").read_text(),
            "sha": served.request("GET", "/api/p/sdpa/file")[2]["sha"]})
        if status != 409:
            break
        assert time.monotonic() - t0 < 10, "the abandoned check still runs"
        time.sleep(0.2)
    assert status == 200 and events[-1]["event"] == "report" and events[-1]["report"]["verdict"] == "accepted", events
    rows = sqlite3.connect(served.home / "progress.sqlite3").execute(
        "SELECT verdict FROM attempts WHERE problem = 'sdpa'").fetchall()
    assert rows == [("accepted",)]  # the abandoned check left no record


def test_the_browser_is_opened_without_the_token_on_its_command_line(tmp_path):
    """Every local user can read a process's command line: the browser gets a private redirect file."""
    import os
    import stat

    seen = tmp_path / "argv.txt"
    fake = tmp_path / "fake-browser"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {seen}\n')
    fake.chmod(0o755)
    (tmp_path / "ws").mkdir()
    s = start_server(tmp_path / "ws", tmp_path / "home", browser=True, env={"BROWSER": f"{fake} %s", "DISPLAY": ""})
    try:
        deadline = time.monotonic() + 20
        while not seen.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        argv = seen.read_text()
        assert s.token not in argv and argv.startswith("file:///")
        page = argv.strip().removeprefix("file://")
        assert stat.S_IMODE(os.stat(page).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(os.path.dirname(page)).st_mode) == 0o700
        assert s.url.replace("&", "&amp;") in open(page).read()  # it redirects to the tokened URL
    finally:
        assert stop_server(s) == 130
    assert not os.path.exists(page)  # removed when the server stops


def test_pages_are_never_cached_and_vendored_files_are_named_by_content(served):
    import hashlib
    import re

    status, headers, page = served.request("GET", "/p/gqa")
    assert headers["cache-control"] == "no-store"
    url = re.search(r'src="(/static/codemirror/codemirror\.js\?v=(\w+))"', page)
    body = (ROOT / "torchcode" / "web" / "static" / "codemirror" / "codemirror.js").read_bytes()
    assert url.group(2) == hashlib.sha256(body).hexdigest()[:12]  # a new version gets a new URL
    status, headers, text = served.request("GET", url.group(1))
    assert status == 200 and "immutable" in headers["cache-control"] and text.encode() == body
    assert served.request("GET", "/api/problems")[1]["cache-control"] == "no-store"


def test_ctrl_c_during_a_check_stops_at_once_and_leaves_nothing_running(tmp_path):
    import os
    import threading

    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "sdpa.py").write_text(
        "import time\n\n\ndef scaled_dot_product_attention(Q, K, V, mask=None):\n    time.sleep(5)\n    return Q\n")
    s = start_server(tmp_path / "ws", tmp_path / "home")
    seen = []

    def check():
        try:
            seen.append(s.request("POST", "/api/p/sdpa/check", body={}))
        except Exception as e:  # the server went away mid-answer: http.client's IncompleteRead and the like
            seen.append(e)

    t = threading.Thread(target=check, daemon=True)
    t.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _descendants(s.proc.pid, "torchcode.session.server"):
        time.sleep(0.1)
    session = _descendants(s.proc.pid, "torchcode.session.server")
    assert session, "no grading session process under the server"
    time.sleep(1.5)  # the check is inside a sleeping case now
    t0 = time.monotonic()
    assert stop_server(s, timeout=15) == 130, "".join(s.output)
    assert time.monotonic() - t0 < 10, "Ctrl-C waited for the check"
    t.join(10)
    assert seen, "the check's request is still open after the server stopped"
    out = "".join(s.output)
    assert "Traceback" not in out and "Exception in ASGI" not in out, out  # Ctrl-C is no error
    if not isinstance(seen[0], Exception):  # the check was stopped, and its page was told so before the server
        status, _, events = seen[0]         # went (on a loaded machine the stream may be cut first, quietly)
        assert status == 200 and events[-1]["event"] == "cancelled", events
    deadline = time.monotonic() + 10
    while any(os.path.exists(f"/proc/{p}") and _alive(p) for p in session) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in session), "the grading session outlived the server"
    from torchcode.progress import Store

    assert Store(tmp_path / "home" / "progress.sqlite3").attempts() == []  # nothing recorded


def _descendants(pid: int, needle: str) -> list[int]:
    """Processes under ``pid`` whose command line contains ``needle``."""
    import os

    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                if ppid != parent:
                    continue
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            except (OSError, ValueError, IndexError):
                continue
            frontier.append(int(entry))
            if needle in cmd:
                found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_token_swap_redirects_only_to_this_server(served):
    for path, where in (("//evil.example/x", "/evil.example/x"), ("/p/sdpa%0d%0aSet-Cookie:x=1", None)):
        status, headers, _ = served.request("GET", f"{path}?token={served.token}", auth=False)
        assert status == 303, path
        assert headers["location"].startswith("/") and not headers["location"].startswith("//")
        assert "\r" not in headers["location"] and "\n" not in headers["location"]
        if where:
            assert headers["location"] == where


def test_what_the_submission_controls_is_shown_inertly_in_the_report():
    from torchcode.grader.result import CaseResult, Report, Verdict
    from torchcode.web.workspace import report_html

    r = Report(problem="sdpa", file="x.py", verdict=Verdict.RUNTIME_ERROR, seed=1, message="<script>alert(1)</script>",
               output="<img src=x onerror=alert(1)>\x1b[2J", cases=[CaseResult("small", Verdict.RUNTIME_ERROR,
                                                                           message="<svg onload=alert(1)>")])
    html = report_html(r, "<b>sdpa.py</b>")
    assert "<script" not in html and "<img" not in html and "<svg" not in html and "<b>" not in html
    assert "&lt;script&gt;" in html and "\x1b" not in html and "\\x1b[2J" in html


def test_without_the_serve_extra_it_says_what_to_install(cli, tmp_path):
    fake = tmp_path / "no_extra" / "uvicorn"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError(\"No module named 'uvicorn'\", name='uvicorn')\n")
    r = cli("serve", "--no-browser", "--port", "0", env={"PYTHONPATH": str(tmp_path / "no_extra")}, timeout=60)
    assert r.code == 2 and "pip install 'torchcode[serve]'" in r.err and "uvicorn" in r.err
    assert "Traceback" not in r.text


def test_a_grader_that_cannot_start_is_said_in_the_terminal_and_the_page_never_a_verdict(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("needs a machine without CUDA (--device cuda must fail to start here)")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "sdpa.py").write_text((ROOT / "solutions" / "sdpa.py").read_text())
    s = start_server(tmp_path / "ws", tmp_path / "home", "--device", "cuda")
    try:
        status, _, events = s.request("POST", "/api/p/sdpa/check", body={})
        assert status == 200 and [e["event"] for e in events] == ["error"], events
        assert "no CUDA device" in events[0]["message"]  # said as an error, not a verdict; nothing recorded (below)
        deadline = time.monotonic() + 10
        while "could not start" not in "".join(s.output) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "warning: the grading session could not start" in "".join(s.output)
    finally:
        assert stop_server(s) == 130
    from torchcode.progress import Store

    assert Store(tmp_path / "home" / "progress.sqlite3").attempts() == []


def test_ctrl_c_while_the_grading_session_starts_stops_at_once(tmp_path):
    """The server starts its grading session ahead, in a thread; a Ctrl-C before it was ready waited for it
    (torch's import and the zygote: seconds, more on a loaded machine). Here its start is held for a minute (a
    sitecustomize that sleeps in the session's process only): Ctrl-C ends it, quietly, and leaves nothing."""
    import os

    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(
        "import time\nwith open('/proc/self/cmdline', 'rb') as f:\n"
        "    if b'torchcode.session.server' in f.read():\n        time.sleep(60)\n")
    (tmp_path / "ws").mkdir()
    path = os.pathsep.join(p for p in (str(slow), os.environ.get("PYTHONPATH", "")) if p)
    s = start_server(tmp_path / "ws", tmp_path / "home", env={"PYTHONPATH": path})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not _descendants(s.proc.pid, "torchcode.session.server"):
        time.sleep(0.1)
    session = _descendants(s.proc.pid, "torchcode.session.server")
    assert session, "no grading session process under the server"
    t0 = time.monotonic()
    assert stop_server(s, timeout=60) == 130, "".join(s.output)
    assert time.monotonic() - t0 < 10, "Ctrl-C waited for the grading session to start"
    out = "".join(s.output)
    assert "Traceback" not in out and "could not start" not in out, out
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in session) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in session), "the grading session outlived the server"


def test_ctrl_c_pressed_twice_after_a_check_is_quiet(tmp_path):
    """The usual end of a session: a check done, the grading session warm and idle, then Ctrl-C, pressed twice
    by an impatient learner. uvicorn hands the Ctrl-Cs back once it has stopped; the KeyboardInterrupt that ends
    the command then cut Starlette's lifespan short, which logged a CancelledError traceback to the terminal."""
    import signal

    (tmp_path / "ws").mkdir()
    shutil.copy(ROOT / "solutions" / "sdpa.py", tmp_path / "ws" / "sdpa.py")
    s = start_server(tmp_path / "ws", tmp_path / "home")
    status, _, events = s.request("POST", "/api/p/sdpa/check", body={})
    assert status == 200 and events[-1]["report"]["verdict"] == "accepted", events[-1]
    s.proc.send_signal(signal.SIGINT)
    time.sleep(0.05)
    assert stop_server(s, timeout=30) == 130, "".join(s.output)  # the second Ctrl-C
    out = "".join(s.output)
    assert "Traceback" not in out and "CancelledError" not in out, out
    assert "torchcode serve stopped" in out, out
