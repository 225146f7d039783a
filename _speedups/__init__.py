"""Cython twins of ``jsclient.protocol``; built as the package ``jsclient._speedups``.

Each module here mirrors the pure-Python module of the same name in
``jsclient/protocol/``: same names, signatures, results and exceptions.
``jsclient._impl`` decides which of the two is used.
"""
