"""The console's pages, one module each with its ``router`` (listed in ``calsync.core.console.app.PAGES``)."""
