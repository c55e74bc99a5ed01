"""calsync-emulators: HTTP emulators of the providers' APIs, the scripted ``calsync demo`` and test fixtures.

A development distribution next to calsync (``emulators/`` in its repository): the runtime wheel and the
Docker image do not contain it. Installed (``python3 dev.py demo|test`` does it), it adds ``calsync demo``
and ``calsync emulator google|ews`` to the CLI through the ``calsync.commands`` entry-point group.

- :mod:`calsync_emulators.server`, :mod:`calsync_emulators.faults`: the HTTP server every emulator runs in,
  its request log and fault rules (the shared ``/_emulator/`` control API);
- :mod:`calsync_emulators.google`, :mod:`calsync_emulators.ews`: Google Calendar v3 and Exchange Web
  Services, each saying in its docstrings what is documented by the provider and what is inferred or chosen
  (sources in docs/notes/emulators.md);
- :mod:`calsync_emulators.control`: the typed client of the control API;
- :mod:`calsync_emulators.demo`: the demo scenario; :mod:`calsync_emulators.cli`: the two commands;
- :mod:`calsync_emulators.pytest_plugin`: the fixtures that start emulators.
"""
