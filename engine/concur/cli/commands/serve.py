"""``concur serve``: the what-if page (:mod:`concur.cli.web`) on this machine, until Ctrl-C.

    $ concur serve --port 8765
    concur serve: http://127.0.0.1:8765/ (Ctrl-C stops it)

Binds 127.0.0.1 unless ``--host`` is given, and then says who can reach it. The page asks the
same questions as ``concur solve`` and ``concur plan`` over the shipped packs and those of
``--pack-path``. Solving runs on this (the main) thread, under the solver's budget; Ctrl-C stops
serving, fails what is still queued and closes the socket.
"""

from __future__ import annotations

import click

from ..options import pack_path_option

__all__ = ["command"]


@click.command(name="serve")
@pack_path_option
@click.option("--host", default="127.0.0.1", show_default=True, help="address to listen on (loopback unless given)")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="port to listen on (0: any free one)"
)
def command(host: str, port: int) -> None:
    """Serve the what-if page: the fleet question, any pack, the plan explorer.

    \b
    concur serve                      (http://127.0.0.1:8765/)
    concur serve --port 0             (a free port, printed)
    """
    import threading

    from ..web.server import is_loopback, make_server

    server = make_server(host, port)
    click.echo(f"concur serve: {server.url} (Ctrl-C stops it)")
    if not is_loopback(host):
        click.echo(
            f"note: listening on {host}, not only loopback: anyone who can reach this address can ask "
            "questions (the page's downloads and answers included)",
            err=True,
        )
    http = threading.Thread(target=server.serve_forever, name="concur-serve-http", daemon=True)
    http.start()
    try:
        server.worker.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        http.join(timeout=10)
    click.echo("concur serve: stopped")
