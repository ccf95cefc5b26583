"""The project's activities (a package named as in most Temporal projects)."""
