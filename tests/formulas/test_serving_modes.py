"""Speculative decoding and prefix caching in the served-step model (llm_throughput, llm_fleet).

What must hold, over models, GPUs, engines and batches drawn by hypothesis:

* both modes are off by default: draft_tokens 0 (whatever the acceptance rate or draft) and
  shared_prefix 0 give exactly the numbers of a question that does not mention them;
* speculation at acceptance rate 0 is never faster than no speculation (itl, served tokens/s), and
  spec_speedup says so (at most 1; never clamped to 1);
* the expected tokens per target step is Leviathan et al.'s (1 - a^(k+1)) / (1 - a), between 1 and
  k + 1, and a measured mean acceptance length given instead solves back to the rate;
* the model never beats its own roofline: served tokens/s <= bound_tokens_per_s, which with
  speculation allows k + 1 tokens per sequence and step;
* a cached prefix computes only the uncached part of the prompt (prefill_tokens), so the prefill, the
  TTFT and the served step never grow with the prefix or its hit rate, and the KV pool holds the
  prefix once (kv_batch_limit grows);
* a prefix as long as the prompt is refused with one line naming the variable (exit 3).
"""

from __future__ import annotations

import subprocess
import sys
from functools import cache
from typing import Any

import pytest
from helpers import concur_child, one_error_line
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from concur.errors import ConcurError
from concur.lang.model import Model, build_model
from concur.solver.question import solve_model

MODELS = ["llama-3.1-8b", "llama-3.1-70b", "qwen3-8b", "qwen3-32b", "mixtral-8x7b"]
GPUS = ["h100-sxm-80gb", "h200-sxm-141gb", "a100-sxm-80gb", "mi300x", "l40s"]
ENGINES = ["vllm", "sglang", "trtllm", None]
NAMES = ("itl", "ttft", "t_step", "t_step_served", "served_tokens_per_s", "spec_speedup", "bound_tokens_per_s")
SETTINGS = settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@cache
def _model() -> Model:
    return build_model(["llm_throughput"])


@st.composite
def replicas(draw: st.DrawFn) -> dict[str, Any]:
    """One loaded replica: a model on a GPU at a TP that fits, a batch and lengths."""
    q: dict[str, Any] = {
        "model": draw(st.sampled_from(MODELS)),
        "gpu": draw(st.sampled_from(GPUS)),
        "tp": draw(st.sampled_from([1, 2, 4, 8])),
        "weight_dtype": draw(st.sampled_from(["bf16", "fp8"])),
        "kv_dtype": "bf16",
        "kv_fit": "ignore",
        "concurrency": f"{draw(st.sampled_from([1, 4, 16, 64, 256]))} request",
        "input_tokens": f"{draw(st.sampled_from([200, 1000, 4000]))} token/request",
        "output_tokens": f"{draw(st.sampled_from([100, 400, 1000]))} token/request",
    }
    engine = draw(st.sampled_from(ENGINES))
    if engine is not None:
        q["engine"] = engine
    return q


@st.composite
def drafts(draw: st.DrawFn) -> dict[str, Any]:
    """A speculative configuration: draft length and a draft model, MTP/EAGLE heads or an n-gram draft."""
    kind = draw(st.sampled_from(["model", "heads", "ngram"]))
    d: dict[str, Any] = {"draft_tokens": draw(st.integers(1, 8))}
    if kind == "model":
        d["draft_params"] = f"{draw(st.sampled_from([0.5e9, 1.24e9, 3e9]))} parameter"
        d["draft_layers"] = draw(st.sampled_from([4, 16, 28]))
    elif kind == "heads":
        d["mtp_layers"] = draw(st.sampled_from([0.5, 1, 2]))
    else:
        d["draft_params"] = "0 parameter"  # said, never assumed: a draft that costs nothing
    return d


def _solve(question: dict[str, Any], names: tuple[str, ...] = NAMES) -> dict[str, float] | None:
    """The values of ``names`` in base units, or None where the replica cannot run (does not fit,
    TP does not divide the heads, the prefill saturates): those are refused with a reason elsewhere."""
    try:
        return dict(solve_model(_model(), names, question).values)
    except ConcurError:
        return None


@SETTINGS
@given(replicas(), drafts(), st.floats(0, 0.999))
def test_speculation_off_changes_nothing(q: dict[str, Any], draft: dict[str, Any], rate: float) -> None:
    """draft_tokens 0 with any acceptance rate and draft gives exactly the plain question's numbers."""
    plain = _solve(q)
    off = _solve({**q, **draft, "draft_tokens": 0, "acceptance_rate": rate})
    assert (plain is None) == (off is None)
    if plain is not None and off is not None:
        for name in NAMES:
            assert off[name] == plain[name], (name, q)
        assert off["spec_speedup"] == 1


@SETTINGS
@given(replicas(), drafts())
def test_acceptance_rate_zero_is_never_faster(q: dict[str, Any], draft: dict[str, Any]) -> None:
    """With nothing accepted a speculative step still drafts and verifies k + 1 tokens per sequence:
    it is never quicker per output token than no speculation, and spec_speedup reports it (<= 1).
    (TTFT is not compared at a fixed batch: slower steps bring fewer requests a second, so the
    prefill queue is shorter; at a fixed rate the fleet test shows the cost.)"""
    plain = _solve(q)
    spec = _solve({**q, **draft, "acceptance_rate": 0})
    if plain is None or spec is None:
        return
    assert spec["itl"] >= plain["itl"] * (1 - 1e-12), (q, draft)
    assert spec["served_tokens_per_s"] <= plain["served_tokens_per_s"] * (1 + 1e-12), (q, draft)
    assert spec["spec_speedup"] <= 1 + 1e-12, (q, draft)


@SETTINGS
@given(replicas(), drafts(), st.floats(0, 0.999))
def test_the_model_never_beats_its_own_roofline(q: dict[str, Any], draft: dict[str, Any], rate: float) -> None:
    """Served output per replica stays under bound_tokens_per_s, which lets a speculative step emit at
    most k + 1 tokens per sequence; the mean tokens per step lies between 1 and k + 1."""
    v = _solve({**q, **draft, "acceptance_rate": rate}, (*NAMES, "spec_tokens_per_step", "verify_tokens"))
    if v is None:
        return
    assert 1 - 1e-12 <= v["spec_tokens_per_step"] <= v["verify_tokens"] * (1 + 1e-12)
    assert v["verify_tokens"] == draft["draft_tokens"] + 1
    assert v["served_tokens_per_s"] <= v["bound_tokens_per_s"] * (1 + 1e-9), (q, draft, rate)


@pytest.mark.parametrize(("k", "rate"), [(1, 0.5), (3, 0.7), (4, 0.8), (7, 0.9)])
def test_tokens_per_step_is_leviathans_expectation_and_solves_back(k: int, rate: float) -> None:
    """(1 - a^(k+1)) / (1 - a) (Leviathan, Kalman, Matias 2023, eq. 1); given as a measured mean
    acceptance length, the solver finds the acceptance rate again."""
    q = {
        "model": "llama-3.1-8b",
        "gpu": "h100-sxm-80gb",
        "input_tokens": "1000 token/request",
        "output_tokens": "400 token/request",
        "concurrency": "8 request",
        "draft_tokens": k,
        "mtp_layers": 1,
    }
    expected = (1 - rate ** (k + 1)) / (1 - rate)
    forward = solve_model(_model(), ("spec_tokens_per_step", "itl"), {**q, "acceptance_rate": rate}).values
    assert forward["spec_tokens_per_step"] == pytest.approx(expected, rel=1e-12)
    back = solve_model(_model(), ("acceptance_rate", "itl"), {**q, "spec_tokens_per_step": expected}).values
    assert back["acceptance_rate"] == pytest.approx(rate, rel=1e-6)
    assert back["itl"] == pytest.approx(forward["itl"], rel=1e-6)


LLAMA70_TP4_AT_64 = {
    "model": "llama-3.1-70b",
    "gpu": "h100-sxm-80gb",
    "tp": 4,
    "input_tokens": "1000 token/request",
    "output_tokens": "400 token/request",
    "concurrency": "64 request",
}


def test_a_draft_whose_cost_is_not_said_is_refused_not_assumed_free() -> None:
    """draft_tokens > 0 without mtp_layers, draft_params or draft_layers would take a free draft, the
    most optimistic speedup: refused with what to give (exit 2), in solve and in plan; a draft that
    costs nothing is said with draft_params=0, and draft_tokens 0 needs no draft."""
    q = {**LLAMA70_TP4_AT_64, "acceptance_rate": 0.7}
    with pytest.raises(ConcurError, match="draft has a cost, and concur assumes none") as info:
        solve_model(_model(), ("itl",), {**q, "draft_tokens": 3})
    assert info.value.exit_code == 2 and info.value.missing == ("mtp_layers",)  # type: ignore[attr-defined]
    free = solve_model(_model(), ("itl",), {**q, "draft_tokens": 3, "draft_params": "0 parameter"}).values["itl"]
    heads = solve_model(_model(), ("itl",), {**q, "draft_tokens": 3, "mtp_layers": 1}).values["itl"]
    assert free < heads  # the free draft is the optimistic one
    assert solve_model(_model(), ("itl",), {**q, "draft_tokens": 0}).values["itl"] > 0
    traffic = ("--set", "arrival_rate=50", "--set", "input_tokens=1000", "--set", "output_tokens=400")
    res = concur_child(
        "plan", "--set", "model=llama-3.1-70b", *traffic, "--gpus", "h100-sxm-80gb", "--engines", "vllm",
        "--set", "draft_tokens=2", "--set", "acceptance_rate=0.6",
    )  # fmt: skip
    assert res.returncode == 2 and "draft has a cost" in one_error_line(res)
    question = ("--set", "model=llama-3.1-8b", "--set", "gpu=h100-sxm-80gb", "--set", "concurrency=8", *traffic[2:])
    swept = concur_child("sweep", "llm_throughput", "--over", "draft_tokens=0..4:5", "--find", "itl", *question)
    assert swept.returncode == 2 and "draft has a cost" in one_error_line(swept)  # a swept draft length too


def test_higher_acceptance_is_faster_and_a_low_one_is_reported_slower() -> None:
    """itl falls as the acceptance rate rises; the rate below which speculation loses shows as
    spec_speedup < 1 (never clamped)."""
    q = {
        **LLAMA70_TP4_AT_64,
        "draft_tokens": 4,
        "draft_params": "1.24e9 parameter",
        "draft_layers": 16,
    }
    rates = [0, 0.1, 0.3, 0.5, 0.7, 0.9]
    runs = [solve_model(_model(), ("itl", "spec_speedup"), {**q, "acceptance_rate": a}).values for a in rates]
    itls = [r["itl"] for r in runs]
    assert itls == sorted(itls, reverse=True)
    assert runs[0]["spec_speedup"] < 0.95  # visibly slower, not clamped to 1
    assert runs[-1]["spec_speedup"] > 1.5


PREFIXED = ("prefill_tokens", "prefill_time", "ttft", "itl", "t_step_served", "kv_batch_limit")


@SETTINGS
@given(replicas(), st.floats(0.05, 0.95), st.floats(0, 1))
def test_prefix_caching_computes_only_the_uncached_prompt(q: dict[str, Any], share: float, hit: float) -> None:
    """A cached prefix never makes the prefill, the TTFT or the served step longer, and the pool
    holds more requests (the prefix once); at hit rate 0 the prefill is the plain one."""
    plain = _solve({**q, "kv_fit": "check"}, PREFIXED)
    isl = float(q["input_tokens"].split()[0])
    prefix = share * isl
    cached = _solve({**q, "kv_fit": "check", "shared_prefix": f"{prefix} token", "prefix_hit_rate": hit}, PREFIXED)
    if plain is None or cached is None:
        return
    assert cached["prefill_tokens"] == pytest.approx(isl - hit * prefix, rel=1e-12)
    for name in ("prefill_time", "ttft", "itl", "t_step_served"):
        assert cached[name] <= plain[name] * (1 + 1e-12), (name, q, prefix, hit)
    assert cached["kv_batch_limit"] > plain["kv_batch_limit"]
    if hit == 0:
        assert cached["prefill_time"] == pytest.approx(plain["prefill_time"], rel=1e-12)


def test_prefix_off_changes_nothing() -> None:
    """shared_prefix 0 with any hit rate is the plain question, number for number."""
    q = {"model": "llama-3.1-70b", "gpu": "h100-sxm-80gb", "tp": 4, "concurrency": "64 request"}
    q |= {"input_tokens": "2500 token/request", "output_tokens": "300 token/request"}
    plain = _solve(q, PREFIXED)
    off = _solve({**q, "shared_prefix": "0 token", "prefix_hit_rate": 0.3}, PREFIXED)
    assert plain is not None and off is not None
    assert {n: off[n] for n in PREFIXED} == {n: plain[n] for n in PREFIXED}


def test_a_prefix_as_long_as_the_prompt_is_one_error_line() -> None:
    """The prompt's last token is always computed: a prefix covering the prompt is refused (exit 3)."""
    args = ["solve", "llm_throughput", "--find", "ttft"]
    for given_ in ("model=llama-3.1-8b", "gpu=h100-sxm-80gb", "concurrency=8", "input_tokens=1000"):
        args += ["--set", given_]
    args += ["--set", "output_tokens=100", "--set", "shared_prefix=1000"]
    out = subprocess.run([sys.executable, "-m", "concur.cli", *args], capture_output=True, text=True, check=False)
    assert out.returncode == 3, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "prefill_tokens" in lines[0] and "llm_throughput.yaml:" in lines[0], out.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["solve", "llm_throughput", "--find", "ttft", "--set", "concurrency=8", "--set", "gpu=h100-sxm-80gb"],
        ["plan", "--set", "arrival_rate=5", "--gpus", "h100-sxm-80gb", "--engines", "vllm"],
    ],
    ids=["solve", "plan"],
)
def test_a_prefix_longer_than_the_prompt_is_an_input_error(command: list[str]) -> None:
    """A typo'd shared_prefix (longer than the whole prompt) is named as the input it is, exit 2, before
    any derived value (the KV pool, the prefill) leaves its bounds; a plan says so once, not per row."""
    args = [*command, "--set", "model=llama-3.1-70b", "--set", "input_tokens=1000", "--set", "output_tokens=400"]
    res = concur_child(*args, "--set", "shared_prefix=2000", "--set", "prefix_hit_rate=0.5")
    line = one_error_line(res)
    assert res.returncode == 2, res.stderr
    assert "llm_throughput.yaml:" in line and "shared_prefix=2000 token" in line and "input_tokens=1000" in line
    assert "configuration" not in line  # not a per-configuration rejection


def test_the_fleet_sizes_on_speculation_and_prefix_caching() -> None:
    """llm_fleet composes both: speculation that pays needs fewer replicas at an ITL target, one that
    does not (acceptance 0) more; a shared prefix fewer."""
    model = build_model(["llm_fleet"])
    q = {
        "model": "llama-3.1-70b",
        "gpu": "h100-sxm-80gb",
        "tp": 4,
        "arrival_rate": "50 request/s",
        "input_tokens": "1000 token/request",
        "output_tokens": "400 token/request",
        "itl_slo": "50 ms",
    }
    spec = {"draft_tokens": 3, "mtp_layers": 1}
    plain = solve_model(model, ("replicas",), q).values["replicas"]
    good = solve_model(model, ("replicas",), {**q, **spec, "acceptance_rate": 0.7}).values["replicas"]
    bad = solve_model(model, ("replicas",), {**q, **spec, "acceptance_rate": 0}).values["replicas"]
    prefix = solve_model(model, ("replicas",), {**q, "shared_prefix": "800 token"}).values["replicas"]
    assert good < plain < bad
    assert prefix < plain


@pytest.mark.parametrize("find", ["ttft", "replicas"], ids=["forward", "goal-seek"])
def test_a_request_longer_than_the_context_window_is_one_error_line(find: str) -> None:
    """Prompt and output beyond the model's max_position_embeddings (models catalog) is refused as the
    input it is (exit 2), before a fleet's goal seek could fail on it as an unservable load."""
    args = ["solve", "llm_fleet", "--find", find]
    for given_ in ("model=llama-3.1-70b", "gpu=h100-sxm-80gb", "tp=4", "arrival_rate=50", "concurrency=8"):
        args += ["--set", given_] if find == "ttft" or not given_.startswith("concurrency") else []
    res = concur_child(*args, "--set", "input_tokens=2000000", "--set", "output_tokens=400")
    line = one_error_line(res)
    assert res.returncode == 2 and "131,072 token context window" in line
    q = {"model": "llama-3.1-70b", "gpu": "h100-sxm-80gb", "tp": 4, "concurrency": "1 request", "kv_fit": "ignore"}
    fits = {**q, "input_tokens": "130000 token/request", "output_tokens": "1000 token/request"}
    assert solve_model(build_model(["llm_fleet"]), ("ttft",), fits).values["ttft"] > 0  # up to the window
    beyond = {**q, "input_tokens": "140000 token/request", "output_tokens": "1000 token/request"}
    with pytest.raises(ConcurError, match="context window"):
        solve_model(build_model(["llm_fleet"]), ("ttft",), beyond)
    measured = solve_model(build_model(["llm_fleet"]), ("ttft",), {**beyond, "context_fit": "ignore"})
    assert measured.values["ttft"] > 0  # a measured run that extended the window is reproduced as run
    traffic = ("--set", "arrival_rate=50", "--set", "input_tokens=200000", "--set", "output_tokens=400")
    plan = concur_child("plan", "--set", "model=llama-3.1-70b", *traffic, "--gpus", "h100-sxm-80gb")
    assert plan.returncode == 2 and "context window" in one_error_line(plan)  # once, not per configuration


def test_the_simulator_refuses_a_free_draft_and_a_request_beyond_the_window() -> None:
    """concur simulate --model engine reads the same rules as solve: one error line, exit 2."""
    sets = ("model=llama-3.1-8b", "gpu=h100-sxm-80gb", "engine=vllm", "input_tokens=1000", "output_tokens=200")
    args = ["simulate", "--model", "engine", "--rate", "4", "--requests", "20"]
    for given_ in sets:
        args += ["--set", given_]
    draft = concur_child(*args, "--set", "draft_tokens=3", "--set", "acceptance_rate=0.7")
    assert draft.returncode == 2 and "draft has a cost" in one_error_line(draft)
    long = concur_child(*args, "--set", "input_tokens=200000")
    assert long.returncode == 2 and "131,072 token context window" in one_error_line(long)
