"""``concur bench serve``: a warm fleet question through ``concur serve``'s HTTP API against the same
warm solve in one Python process.

The question is the fleet page's default: ``llm_fleet``'s embedded scenario, asking for the answers
the page shows (replicas, fleet GPUs, cost per month and per million tokens, TTFT, ITL). The server
runs in this process on a loopback port the OS picks (:func:`concur.cli.web.server.running`); a
request is one keep-alive ``POST /api/solve`` with the page's Origin, timed until its JSON is
parsed, and includes everything the page gets: the solve, the CLI's answer text and derivation,
the JSON. The baseline is :func:`concur.solve` (:func:`concur.api.solve`) on the same words. Both are warmed once, then timed
in interleaved rounds (HTTP, in-process, HTTP, ...), so a neighbour's load hits both alike.

Target: the HTTP answer within 3x the in-process solve.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import statistics
import time
from typing import Any

import click

from ..api import solve
from ..cli.web.questions import FLEET_ANSWERS, FLEET_FIELDS
from ..cli.web.server import running
from ..lang.model import default_scenario

TARGET = 3.0


@click.command()
@click.option("--runs", default=21, show_default=True, type=click.IntRange(1, 1000), help="interleaved rounds")
def command(runs: int) -> None:
    """A warm fleet question via concur serve's HTTP API vs the same warm solve in-process (target <= 3x)."""
    given = {k: v for k, v in default_scenario(["llm_fleet"]).items() if k in FLEET_FIELDS}
    find = list(FLEET_ANSWERS)
    body = json.dumps({"packs": ["llm_fleet"], "find": find, "given": given}).encode()
    with running() as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
        headers = {
            "Host": f"127.0.0.1:{server.port}",
            "Origin": f"http://127.0.0.1:{server.port}",
            "Content-Type": "application/json",
        }

        answers: dict[str, Any] = {}

        def over_http() -> float:
            start = time.perf_counter()
            conn.request("POST", "/api/solve", body=body, headers=headers)
            response = conn.getresponse()
            answer = json.loads(response.read())
            elapsed = time.perf_counter() - start
            if response.status != 200:
                raise click.ClickException(f"the server refused the question: {answer['error']['line']}")
            answers["http"] = answer["results"]
            return elapsed

        def in_process() -> float:
            start = time.perf_counter()
            sol = solve(find, given, ["llm_fleet"])
            elapsed = time.perf_counter() - start
            answers["local"] = sol.results()
            return elapsed

        over_http(), in_process()  # warm: parsed packs, closed forms, the connection
        for name in find:  # both sides answer the same before either is timed
            a, b = answers["http"][name]["value"], answers["local"][name]["value"]
            if not math.isclose(a, b, rel_tol=1e-9):
                raise click.ClickException(f"the server says {name} = {a}, the solver {b}")
        samples: dict[str, list[float]] = {"http": [], "local": []}
        for _ in range(runs):
            samples["http"].append(over_http())
            samples["local"].append(in_process())
        conn.close()
    web, local = statistics.median(samples["http"]), statistics.median(samples["local"])
    ratio = web / local
    click.echo(f"cores: {os.cpu_count()}  median of {runs} interleaved rounds; question: llm_fleet's embedded scenario")
    spread = {k: f"({min(v) * 1000:.1f}-{max(v) * 1000:.1f})" for k, v in samples.items()}
    click.echo(f"  concur serve, POST /api/solve (answer, text, derivation)  {web * 1000:8.1f} ms {spread['http']}")
    click.echo(f"  concur.solve in this process                             {local * 1000:8.1f} ms {spread['local']}")
    click.echo(f"ratio {ratio:.2f}x (target <= {TARGET:g}x: {'met' if ratio <= TARGET else 'MISSED'})")
