"""Typed catalogs with packaged data: hardware, models, engines and their feature gates, images, golden AL curves.

Every catalog reads YAML shipped under ``catalog/data/`` and then the same file names in the directories named by
``LLMSWEEP_CATALOG_DIR`` (``os.pathsep``-separated; default ``~/.config/llmsweep/catalog`` when it exists), so a user
adds or overrides an entry without touching code. Every number carries its source or is marked as an estimate.
"""
