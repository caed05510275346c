"""The load path: what sends requests and times them. :mod:`~bench.load.sweep` runs a grid of
cells, each on the hot path (:mod:`~bench.load.hotload`, :mod:`~bench.load.hotpath`, in one
process or several: :mod:`~bench.load.workers`); the client's own limits are watched by
:mod:`~bench.load.monitor`, :mod:`~bench.load.window` and :mod:`~bench.load.server_metrics`.
"""
