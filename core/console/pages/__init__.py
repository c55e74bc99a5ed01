"""The console's pages: each module has a ``router`` (core/console/app.py lists the modules in ``PAGES``)."""
