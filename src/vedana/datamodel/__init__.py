"""The data model: what anchors (node types), links (edge types) and attributes exist."""

from vedana.datamodel.model import (
    Anchor,
    Attribute,
    DataModel,
    LifecycleEvent,
    Link,
    Prompt,
    Query,
)

__all__ = ["Anchor", "Attribute", "DataModel", "LifecycleEvent", "Link", "Prompt", "Query"]
