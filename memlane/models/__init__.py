"""memlane's data: pydantic schemas, SQLAlchemy tables, migrations and the store."""
