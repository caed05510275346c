"""The load path: what sends requests and times them.

:mod:`~bench.load.sweep` runs a grid of cells; each cell's load runs on
:mod:`~bench.load.hotload` / :mod:`~bench.load.hotpath` (aiohttp on uvloop, in one process or
several: :mod:`~bench.load.workers`), reading the stream with :mod:`~bench.load.sse`;
its preflight and probe send one request the same way; the client's own limits
are watched by :mod:`~bench.load.monitor` (event-loop lag), :mod:`~bench.load.window` and
:mod:`~bench.load.server_metrics` (the server's view from ``/metrics``);
:mod:`~bench.load.prompts` builds prompts of exact token lengths.
"""
