"""Where a metric point comes in: a batch is parsed, each point validated on its own, and the valid ones stored
(:func:`server.intake.ingest.ingest`). Nothing here fits a curve: the point fit is :mod:`server.assess.point_fit`."""
