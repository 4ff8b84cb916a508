"""Every table of the service's database: the core models (``server.store.models``) and the alert models
(``server.store.alert_models``) in one ``MetaData``.

Migrations (``server/store/migrations/env.py``) and schema checks read :data:`METADATA` from here, so no module
registers tables as a side effect of being imported: ``server.store.models`` does not know the alert models.
"""

from __future__ import annotations

from sqlalchemy import MetaData

from server.store.alert_models import Alert, AlertDelivery, AlertThreshold, Webhook
from server.store.models import Base

#: The alert tables share the core models' declarative base (and the migrations).
ALERT_MODELS = (Webhook, Alert, AlertDelivery, AlertThreshold)
METADATA: MetaData = Base.metadata
