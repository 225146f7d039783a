"""Sans-I/O NATS protocol: bytes in, frames out; commands out.

No sockets, threads or clocks here. The modules with a Cython twin
(``parser``, ``jsack``, ``status``, ``sizes``) are the specification of that
twin; use them through :mod:`jsclient._impl`.
"""
