"""Stand-ins for the servers vedana talks to over HTTP: a Grist server (`fake_grist`, with the
`.grist`/CSV/API shapes it serves built by `grist_files`) and an OpenAI-compatible LLM that plays
scripted replies (`fake_llm`). The tests use them, and so does `scripts/readme_outputs.py` for the
README's generated outputs; they live outside `tests/` so that scripts need not import the tests."""
