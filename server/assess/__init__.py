"""Where a run and an experiment are assessed: fits (point and full), forecasts, recommendations, the verdict,
cards, ETAs, the one stored assessment every surface reads (:mod:`server.assess.assessing`), the work that keeps it
current off the request path (:mod:`server.assess.background`) and the dashboard charts' read models
(:mod:`server.assess.charts`)."""
