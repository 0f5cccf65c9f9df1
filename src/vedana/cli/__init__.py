"""The `vedana` command line. Modules here import only stdlib, typer and vedana's light
modules at top level; heavy libraries are imported inside command functions."""
