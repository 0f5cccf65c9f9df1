"""`vedana model`: the synced data model as the agent sees it, with the search settings in
force for each embeddable attribute, and as JSON Schema."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vedana.datamodel import Anchor, Attribute, DataModel, Link

if TYPE_CHECKING:
    from vedana.config import Settings


def load_model(settings: Settings) -> DataModel:
    """The data model as last synced (a `NotSynced` error before the first sync)."""
    from vedana.errors import NotSynced
    from vedana.stores.postgres import get_engine
    from vedana.stores.staging import load_data_model

    with get_engine(settings).connect() as conn:
        dm = load_data_model(conn)
    if not dm.anchors:
        raise NotSynced("no data model has been synced yet; run `vedana sync` first")
    return dm


def search_settings(settings: Settings, attribute: Attribute) -> dict[str, Any]:
    """Threshold and top-n a vector search over `attribute` uses, and where each comes from."""
    from vedana.embeddings import default_threshold

    if attribute.embed_threshold is not None:
        threshold, source = attribute.embed_threshold, "data model"
    elif settings.embeddings_threshold is not None:
        threshold, source = settings.embeddings_threshold, "EMBEDDINGS_THRESHOLD"
    else:
        threshold, source = (
            default_threshold(settings.embeddings_model),
            f"default for {settings.embeddings_model}",
        )
    top_n = attribute.embed_top_n if attribute.embed_top_n is not None else settings.embeddings_top_n
    return {"threshold": threshold, "threshold_from": source, "top_n": top_n}


def model(settings: Settings) -> dict[str, Any]:
    """The data model as a dict (`--json`): anchors, links, queries, prompts, lifecycle; each
    embeddable attribute with the `search` settings in force."""
    dm = load_model(settings)
    data = dm.to_dict()
    owners: list[tuple[Anchor | Link, dict[str, Any]]] = [
        *zip(dm.anchors, data["anchors"], strict=True),
        *zip(dm.links, data["links"], strict=True),
    ]
    for owner, out in owners:
        for attribute, attr_out in zip(owner.attributes, out["attributes"], strict=True):
            if attribute.embeddable:
                attr_out["search"] = search_settings(settings, attribute)
    data["queries"] = [{"id": i, **q} for i, q in enumerate(data["queries"], start=1)]
    return data


def model_json_schema(settings: Settings) -> dict[str, Any]:
    from vedana.datamodel.schema import json_schemas

    return json_schemas(load_model(settings))


def model_prompt_text(settings: Settings) -> str:
    """Exactly what the agent's system prompt holds of the (whole) data model."""
    from vedana.datamodel.render import numbered_queries, render_playbook, render_text

    dm = load_model(settings)
    return render_text(dm) + "\n\n" + render_playbook(numbered_queries(dm))
