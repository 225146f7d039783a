"""The I/O core of a connection, by concern (the façade is :mod:`jsclient.connection`).

- :mod:`.options`: connection options and states;
- :mod:`.servers`: the server pool (sans-I/O: which server next, and when);
- :mod:`.auth`: creds files, nkeys, the CONNECT options;
- :mod:`.handshake`: TCP, TLS, INFO, CONNECT, the first PONG;
- :mod:`.writer`: the bounded write queue, the flusher thread, inline writes,
  whole commands across a reconnect;
- :mod:`.reader`: the reader thread, requesters that read their own reply,
  the TLS read/write loop.
"""
