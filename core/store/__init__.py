"""Persistence: the relational database (schema, migrations, one repository module per table)."""
