"""The scalerl service: experiments, runs, metrics and live forecasts over REST (FastAPI + SQLAlchemy 2).

Never imports torch. ``server.app.create_api`` builds the REST API from :class:`server.store.settings.Settings`;
``scalerl.app.create_app`` adds the dashboard's pages (web).
"""
