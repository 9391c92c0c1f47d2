"""``concur serve``: a local what-if page over the same packs, questions and answers as the CLI.

How it is designed, and why
---------------------------
Capacity questions are explored ("what if the prompts double, what if we move to H200"), so the
page answers as its fields change. It adds no second solver and no second vocabulary: a page
question is the words of ``concur solve`` (packs, ``--find``, ``--set NAME=VALUE``), solved by the
CLI's own :func:`concur.cli.givens.solve_question` and shown by the CLI's own renderer, so the
answer text, the derivation ("why") and the notes are what ``concur solve`` prints, and every view
shows the ``concur`` command line that reproduces it (:mod:`concur.cli.web.questions`).

The server is the standard library's (:mod:`concur.cli.web.server`): a local tool needs no framework,
and nothing to install means nothing to keep patched. Every asset -- the page, its script, its
style, the chart (hand-written SVG) -- ships inside the wheel in ``concur/cli/web/static``; the page
loads nothing from anywhere else, and its content security policy forbids it.

Safety: the server binds 127.0.0.1 unless ``--host`` says otherwise (and then says so); requests
are size-limited, must name this server as their Host, and those that solve must come from its
own page (Origin); packs are named, never given as paths, and come only from the shipped set and
``--pack-path``; every question runs under the solver's budget, one at a time; an error is the
CLI's one line, shown beside the field it concerns, never a traceback.

Non-goals: accounts, persistence, serving many users (it is a local tool: one question at a time).
"""

from .server import ConcurServer, make_server, running

__all__ = ["ConcurServer", "make_server", "running"]
