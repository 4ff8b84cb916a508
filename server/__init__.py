"""The scalerl service: experiments, runs, metrics and live forecasts over REST (FastAPI + SQLAlchemy 2).

Never imports torch. ``server.app.create_app`` builds the ASGI app from :class:`server.settings.Settings`.
"""
