"""Where things are kept: settings, the database engine and sessions, the ORM tables, their Alembic migrations
(``server.store.migrations``, shipped inside the package) and the stored event rows. Imports only ``server.base``."""
