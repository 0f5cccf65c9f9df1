"""Extract, transform, load: `sync` (Grist → Postgres staging) and `index` (staging → vectors + graph).

Nothing heavy is imported here; import `vedana.etl.sync` for the sync entry point.
"""
