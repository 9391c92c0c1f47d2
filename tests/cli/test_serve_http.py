"""``concur serve`` over HTTP, without a browser: the answers are the CLI's, and the checks hold.

One server per module on a port the OS picks, on loopback. The answers are compared with what the
CLI and the Python API give for the same words at test time (another part of the project may
change the fleet model; nothing here hard-codes one of its numbers).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import concur
from concur.cli.givens import default_scenario
from concur.cli.web import questions
from concur.cli.web.server import ASSETS, MAX_BODY, SolveWorker, asset, running

FLEET = ["llm_fleet"]


@pytest.fixture(scope="module")
def server():
    with running() as srv:
        yield srv


def _request(server, method, path, body=None, headers=None, *, origin=True, raw=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    hdrs = {"Host": f"127.0.0.1:{server.port}"}
    if origin:
        hdrs["Origin"] = f"http://127.0.0.1:{server.port}"
    if body is not None:
        raw = json.dumps(body).encode()
        hdrs["Content-Type"] = "application/json"
    hdrs.update(headers or {})
    try:
        conn.request(method, path, body=raw, headers=hdrs)
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def _json(server, path, body, **kw):
    status, _headers, data = _request(server, "POST", path, body, **kw)
    return status, json.loads(data)


def _fleet_given(**changes):
    given = {k: v for k, v in default_scenario(FLEET).items() if k in questions.FLEET_FIELDS}
    given.update(changes)
    return given


def _cli(command: str) -> subprocess.CompletedProcess[str]:
    words = shlex.split(command)
    assert words[0] == "concur"
    return subprocess.run([sys.executable, "-m", "concur.cli", *words[1:]], capture_output=True, text=True, timeout=300)


def test_page_and_assets_are_served_with_no_external_url(server):
    status, headers, _body = _request(server, "GET", "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    assert headers["X-Frame-Options"] == "DENY"
    for name in ASSETS:
        text = asset(name).decode()
        assert not re.search(r"(https?:)?//[\w.-]+\.[a-z]{2,}", text), f"{name} names an external URL"
        assert not re.search(r"@import|url\(", text), name
        status, _, served = _request(server, "GET", f"/static/{name}")
        assert status == 200 and served == asset(name)


def test_the_fleet_answer_is_the_cli_answer_and_its_command_line_prints_it(server):
    given = _fleet_given(arrival_rate=80)
    find = list(questions.FLEET_ANSWERS)
    status, answer = _json(server, "/api/solve", {"packs": FLEET, "find": find, "given": given})
    assert status == 200, answer
    sol = concur.solve(find, given, FLEET)
    assert answer["results"]["replicas"]["value"] == sol.value("replicas")
    assert answer["results"]["itl"]["value"] == pytest.approx(sol.value("itl"), rel=1e-9)
    out = _cli(answer["command"])  # the line under the answer, run in a terminal
    assert out.returncode == 0, out.stderr
    assert out.stdout.rstrip("\n") == answer["text"]
    assert "note: assumed utilization" in answer["text"]  # the stated notes, as the CLI states them
    explain = _cli(answer["command"] + " --explain")
    assert explain.stdout.rstrip("\n") == answer["why"]


def test_solving_for_the_rate_from_a_budget_is_the_cli_answer(server):
    given = _fleet_given(monthly_budget=100000)
    del given["arrival_rate"]
    find = ["arrival_rate", *questions.FLEET_ANSWERS]
    status, answer = _json(server, "/api/solve", {"packs": FLEET, "find": find, "given": given})
    assert status == 200, answer
    sol = concur.solve(find, given, FLEET)
    assert answer["results"]["arrival_rate"]["value"] == pytest.approx(sol.value("arrival_rate"), rel=1e-9)
    assert "--find arrival_rate," in answer["command"]


def test_a_bad_value_is_the_cli_error_line_and_names_its_field(server):
    given = _fleet_given(arrival_rate="abc")
    status, answer = _json(server, "/api/solve", {"packs": FLEET, "find": ["replicas"], "given": given})
    assert status == 400
    err = answer["error"]
    assert err["field"] == "arrival_rate" and err["code"] == 2
    words = ["concur", "solve", "llm_fleet", "--find", "replicas"]
    for k, v in given.items():
        words += ["--set", f"{k}={v}"]
    out = _cli(shlex.join(words))
    assert out.returncode == 2 and out.stderr.strip() == err["line"]
    assert "\n" not in err["line"] and "Traceback" not in json.dumps(answer)


def test_an_error_without_a_variable_is_placed_by_the_field_its_message_names(server):
    status, answer = _json(
        server, "/api/solve", {"packs": FLEET, "find": ["replicas"], "given": _fleet_given(gpu="h999")}
    )
    assert status == 400 and answer["error"]["field"] == "gpu"
    assert answer["error"]["line"].startswith("error: unknown gpu 'h999'")


@pytest.mark.parametrize("pack", sorted(questions.available_packs()))
def test_every_shipped_pack_is_offered_and_answers_its_first_example_as_the_api_does(server, pack):
    status, _, data = _request(server, "GET", f"/api/meta?packs={pack}")
    doc = json.loads(data)
    assert status == 200 and doc["pack"] == pack and doc["variables"]
    example = doc["example"] if doc["example"] is not None else None
    if example is None:
        return  # no worked example: the page starts from the embedded scenario
    status, answer = _json(server, "/api/solve", {"packs": [pack], **example})
    sol = concur.solve(example["find"], example["given"], [pack])
    assert status == 200, answer
    for name in example["find"]:
        want = sol.results()[name]["value"]
        got = answer["results"][name]["value"]
        assert got == (pytest.approx(want, rel=1e-9) if isinstance(want, float) else want)


def test_any_pack_and_its_meta(server):
    status, _headers, data = _request(server, "GET", "/api/meta?packs=queueing")
    doc = json.loads(data)
    assert status == 200 and doc["pack"] == "queueing" and "servers" in doc["variables"]
    assert set(doc["packs"]) >= {"queueing", "token_bucket", "llm_fleet"}
    example = doc["example"]
    status, answer = _json(server, "/api/solve", {"packs": ["queueing"], **example})
    assert status == 200, answer
    sol = concur.solve(example["find"], example["given"], ["queueing"])
    for name in example["find"]:
        assert answer["results"][name]["value"] == pytest.approx(sol.value(name), rel=1e-9)


@pytest.mark.parametrize("packs", [["../formulas/queueing"], ["/etc/passwd"], ["nosuchpack"], ["queueing.yaml"]])
def test_packs_come_only_from_the_shipped_set_by_name(server, packs):
    status, answer = _json(server, "/api/solve", {"packs": packs, "find": ["x"], "given": {}})
    assert status == 400 and answer["error"]["line"].startswith("error: ")
    status, _, data = _request(server, "GET", f"/api/meta?packs={packs[0]}")
    assert status == 400 and json.loads(data)["error"]["line"].startswith("error: ")


def test_post_needs_this_servers_origin(server):
    body = {"packs": FLEET, "find": ["replicas"], "given": {}}
    assert _json(server, "/api/solve", body, origin=False)[0] == 403
    status, answer = _json(server, "/api/solve", body, headers={"Origin": "http://evil.example"})
    assert status == 403 and "Origin" in answer["error"]["line"]
    status, _ = _json(server, "/api/solve", body, headers={"Sec-Fetch-Site": "cross-site"})
    assert status == 403


def test_a_foreign_host_header_is_refused(server):
    status, _, data = _request(server, "GET", "/", headers={"Host": f"attacker.example:{server.port}"})
    assert status == 421 and json.loads(data)["error"]["line"].startswith("error: ")


def test_requests_are_size_limited_before_they_are_read(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:  # announce a huge body, send none: the refusal must come without waiting for it
        conn.putrequest("POST", "/api/solve", skip_host=True)
        conn.putheader("Host", f"127.0.0.1:{server.port}")
        conn.putheader("Origin", f"http://127.0.0.1:{server.port}")
        conn.putheader("Content-Length", str(MAX_BODY + 1))
        conn.endheaders()
        resp = conn.getresponse()
        assert resp.status == 413 and "bytes" in json.loads(resp.read())["error"]["line"]
    finally:
        conn.close()
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:  # no Content-Length
        head = f"POST /api/solve HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nOrigin: http://127.0.0.1:{server.port}\r\n\r\n"
        sock.sendall(head.encode())
        assert sock.recv(65536).decode().startswith("HTTP/1.1 411")
    status, _, _ = _request(server, "GET", "/" + "a" * 9000)
    assert status == 414
    status, _, data = _request(server, "POST", "/api/solve", raw=b"{not json", headers={"Content-Length": "9"})
    assert status == 400 and "not JSON" in json.loads(data)["error"]["line"]


def test_a_malformed_request_is_one_line_not_a_stack_page(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        sock.sendall(b"GET / HTTP/2.0\r\n\r\n")  # a version the stdlib refuses
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    text = data.decode()
    assert text.startswith("HTTP/1.1 505") and '"line": "error: ' in text and "Traceback" not in text
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        sock.sendall(b"BOGUS\r\n\r\n")  # not even a request line: the answer is still one line
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, body = data.decode().split("\r\n\r\n", 1)
    assert head.startswith("HTTP/1.1 400")
    assert body == '{"error": {"line": "error: Bad request syntax (\'BOGUS\')", "field": null}}'


def test_a_bug_is_one_line_in_the_page(server, monkeypatch, capsys):
    def broken(q):
        raise RuntimeError("boom")

    monkeypatch.setattr(questions, "solve", broken)
    status, answer = _json(server, "/api/solve", {"packs": FLEET, "find": ["replicas"], "given": {}})
    assert status == 500 and "\n" not in answer["error"]["line"] and "boom" not in answer["error"]["line"]
    assert "Traceback" in capsys.readouterr().err  # the terminal keeps the details
    from concur.cli.web import server as web_server

    monkeypatch.setattr(web_server, "asset", broken)  # a bug outside any question
    status, _, data = _request(server, "GET", "/")
    line = json.loads(data)["error"]["line"]
    assert status == 500 and line.startswith("error: internal error (RuntimeError)") and "\n" not in line


def test_plan_lists_the_cli_plans_rows(server):
    given = {
        k: v
        for k, v in default_scenario(FLEET).items()
        if k in ("model", "arrival_rate", "input_tokens", "output_tokens")
    }
    status, answer = _json(server, "/api/plan", {"given": given})
    assert status == 200, answer
    words = ["concur", "plan", "--json"] + [w for k, v in given.items() for w in ("--set", f"{k}={v}")]
    out = _cli(shlex.join(words))
    assert out.returncode == 0, out.stderr
    cli_rows = json.loads(out.stdout)["candidates"]
    key = lambda r: (r["gpu"], r["tp"], r["weight_dtype"], r["kv_dtype"], r["engine"], r["replicas"], r["feasible"])
    assert [key(r) for r in answer["candidates"]] == [key(r) for r in cli_rows]
    assert any(not r["feasible"] and r["reason"] for r in answer["candidates"])  # rejected rows say why
    assert answer["command"] == shlex.join(["concur", "plan"] + words[3:])


def test_downloads_json_csv_and_command_line(server):
    body = {"packs": FLEET, "find": ["replicas", "cost_per_month"], "given": _fleet_given()}
    status, headers, data = _request(server, "POST", "/api/download/answer.json", body)
    assert status == 200 and 'filename="answer.json"' in headers["Content-Disposition"]
    doc = json.loads(data)
    status, headers, data = _request(server, "POST", "/api/download/answer.csv", body)
    lines = data.decode().splitlines()
    assert lines[0] == "kind,name,value,unit"
    assert f"result,replicas,{doc['results']['replicas']['value']},replica" in lines
    status, _, data = _request(server, "POST", "/api/download/plan.csv", {"given": {}})
    assert status == 200 and data.decode().startswith("gpu,tp,weight_dtype")
    status, _, _ = _request(server, "POST", "/api/download/nothing.exe", body)
    assert status == 404


@pytest.mark.libreoffice
def test_the_workbook_download_recalculates_to_the_shown_answer(server, tmp_path):
    from concur.excel.recalc import recalculate_values

    if not __import__("shutil").which("soffice"):
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("soffice is not on PATH, and CI=true requires it", pytrace=False)
        pytest.skip("soffice is not on PATH")
    body = {"packs": FLEET, "find": ["replicas", "cost_per_month"], "given": _fleet_given(arrival_rate=80)}
    _, answer = _json(server, "/api/solve", body)
    status, _, data = _request(server, "POST", "/api/download/answer.xlsx", body)
    assert status == 200 and data[:2] == b"PK"
    path = tmp_path / "answer.xlsx"
    path.write_bytes(data)
    values = recalculate_values(path, ["replicas", "cost_per_month"])
    assert values["replicas"] == answer["results"]["replicas"]["value"]
    assert values["cost_per_month"] == pytest.approx(answer["results"]["cost_per_month"]["value"], rel=1e-6)


def test_the_default_server_listens_on_loopback_only():
    with running() as srv:
        assert srv.socket.getsockname()[0] == "127.0.0.1"
        assert srv.url == f"http://127.0.0.1:{srv.port}/"


def _own_address() -> str | None:
    """This machine's address on its default route, if any (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
            address = s.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_concur_serve_prints_its_url_binds_loopback_and_stops_cleanly_on_ctrl_c():
    proc = subprocess.Popen(
        [sys.executable, "-m", "concur.cli", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        match = re.match(r"concur serve: http://127\.0\.0\.1:(\d+)/ \(Ctrl-C stops it\)$", line.strip())
        assert match, line
        port = int(match.group(1))
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("GET", "/")
        assert conn.getresponse().status == 200
        conn.close()
        other = _own_address()
        if other is not None:
            with pytest.raises(OSError):
                socket.create_connection((other, port), timeout=10).close()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert out.strip().endswith("concur serve: stopped") and "Traceback" not in err


def test_a_host_other_than_loopback_is_announced(monkeypatch):
    from click.testing import CliRunner

    from concur.cli import cli
    from concur.cli.web import server as web_server

    real = web_server.make_server
    monkeypatch.setattr(web_server, "make_server", lambda host, port: real("127.0.0.1", 0))  # never bind elsewhere
    monkeypatch.setattr(SolveWorker, "run", lambda self: (_ for _ in ()).throw(KeyboardInterrupt()))
    result = CliRunner().invoke(cli, ["serve", "--host", "0.0.0.0", "--port", "0"])
    assert result.exit_code == 0, result.output
    assert "note: listening on 0.0.0.0, not only loopback" in result.output
    assert web_server.is_loopback("::1") and web_server.is_loopback("localhost")
    assert not web_server.is_loopback("0.0.0.0") and not web_server.is_loopback("192.168.1.2")


def test_the_worker_answers_in_order_and_shutdown_fails_what_is_left():
    worker = SolveWorker()
    done = worker.submit(lambda: 42)
    failed = worker.submit(lambda: 1 / 0)
    after = worker.submit(lambda: "after")
    worker.stop()
    worker.stop()  # idempotent
    refused = worker.submit(lambda: "late")
    worker.run()  # runs what was queued before stop, then returns
    assert done.result() == 42 and after.result() == "after"
    assert isinstance(failed.exception(), ZeroDivisionError)
    assert type(refused.exception()).__name__ == "_Shutdown"


def test_the_worker_queue_is_bounded_and_an_abandoned_question_never_runs(monkeypatch):
    """The queue took every question (a flood of requests, each timing out after ANSWER_SECONDS, left
    all of them to run one by one afterwards); a request that stopped waiting did not cancel its own."""
    from concur.cli.web import server as web

    worker = SolveWorker()
    ran: list[int] = []
    queued = [worker.submit(lambda i=i: ran.append(i)) for i in range(web.MAX_WAITING)]
    busy = worker.submit(lambda: ran.append(-1))
    assert type(busy.exception(timeout=0)).__name__ == "_Busy"
    monkeypatch.setattr(web, "ANSWER_SECONDS", 0.0)  # the worker is not running: the wait times out at once
    handler = SimpleNamespace(server=SimpleNamespace(worker=SolveWorker()))
    with pytest.raises(web._Asked):
        web._Handler._ask(handler, lambda: ran.append(-2), None)  # type: ignore[arg-type]
    handler.server.worker.stop()
    handler.server.worker.run()
    worker.stop()
    worker.run()
    assert ran == list(range(web.MAX_WAITING)) and all(f.done() for f in queued)


def test_busy_port_is_one_line(server):
    from concur.cli.web.server import make_server
    from concur.errors import UsageError

    with pytest.raises(UsageError, match=r"cannot listen on 127\.0\.0\.1:\d+"):
        make_server("127.0.0.1", server.port)


def test_the_web_assets_are_package_data():
    import tomllib

    data = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    patterns = data["tool"]["setuptools"]["package-data"]["concur.cli.web"]
    for name in ASSETS:
        assert any(Path("static", name).match(p) for p in patterns), name


def test_a_pack_path_pack_is_offered_and_solved_by_name(tmp_path):
    from concur.lang.library import pack_path, set_pack_path

    (tmp_path / "little_mine.yaml").write_text(
        "pack: little_mine\ndoc: Little's law, mine.\nvariables:\n"
        "  rate: {unit: request/s}\n  wait: {unit: s}\n  held: {unit: request}\n"
        "equations:\n  - held = rate * wait\n"
    )
    before = pack_path()
    set_pack_path([tmp_path])
    try:
        with running() as srv:
            status, _, data = _request(srv, "GET", "/api/meta?packs=little_mine")
            assert status == 200 and json.loads(data)["packs"]["little_mine"] == str(tmp_path.resolve())
            body = {"packs": ["little_mine"], "find": ["wait"], "given": {"rate": 50, "held": 1000}}
            status, answer = _json(srv, "/api/solve", body)
            assert status == 200 and answer["results"]["wait"] == {"value": 20, "unit": "s"}
            assert answer["command"].startswith(f"concur solve --pack-path {tmp_path.resolve()} little_mine ")
            status, answer = _json(srv, "/api/solve", {**body, "packs": [str(tmp_path / "little_mine.yaml")]})
            assert status == 400  # a path is never a pack name
    finally:
        set_pack_path(before)


def test_on_an_address_given_with_host_any_name_is_answered_but_origin_must_match_it():
    with running() as srv:
        srv.hosts = None  # what --host ADDRESS sets (the test itself stays on loopback)
        name = f"capacity.lan:{srv.port}"
        status, _, _ = _request(srv, "GET", "/", headers={"Host": name})
        assert status == 200
        body = {"packs": ["queueing"], "find": ["load"], "given": {"arrival_rate": 1, "service_time": 2}}
        status, _ = _json(srv, "/api/solve", body, headers={"Host": name, "Origin": f"http://{name}"})
        assert status == 200
        status, _ = _json(srv, "/api/solve", body, headers={"Host": name})  # Origin of 127.0.0.1: another page
        assert status == 403


def test_json_has_no_infinity_or_nan():
    assert questions.json_text({"a": [1.5, float("inf")], "b": {"c": float("nan")}}) == (
        '{"a": [1.5, null], "b": {"c": null}}'
    )


CURVE = {
    "packs": ["llm_throughput"],
    "find": ["tokens_per_s_per_gpu"],
    "given": {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "input_tokens": 1024, "output_tokens": 2048},
    "over": "concurrency=1..256:9",
    "log": True,
}


def test_a_curve_is_concur_sweeps_columns_with_units(server):
    status, answer = _json(server, "/api/curve", CURVE)
    assert status == 200, answer
    out = _cli(answer["command"] + " --json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    (run,) = doc["runs"]
    assert answer["x"]["values"] == pytest.approx(run["columns"]["concurrency"], rel=1e-12)
    assert answer["x"]["unit"] == doc["units"]["concurrency"] == "request"
    (series,) = answer["series"]
    assert series["unit"] == doc["units"]["tokens_per_s_per_gpu"]
    cli = run["columns"]["tokens_per_s_per_gpu"]
    assert [v is None for v in series["values"]] == [v is None for v in cli]  # the same points have no answer
    assert [v for v in series["values"] if v is not None] == pytest.approx([v for v in cli if v is not None], rel=1e-9)
    assert answer["notes"] == doc["messages"]


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"over": "concurrency=1..256:100000"}, "2 to 2000 points"),
        ({"over": "concurrency=1,2,3"}, "must be a range"),
        ({"over": "concurrency=0..8:4"}, "--log needs positive ends"),
        ({"given": {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb"}}, "input_tokens"),
    ],
)
def test_a_bad_curve_is_one_error_line(server, change, words):
    status, answer = _json(server, "/api/curve", {**CURVE, **change})
    assert status == 400 and words in answer["error"]["line"] and "\n" not in answer["error"]["line"]
