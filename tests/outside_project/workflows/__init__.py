"""The project's workflows (a package named as in most Temporal projects)."""
