"""The benchmark harness (issue 6): longtools side by side with its peers and the floors.

``bench/run`` installs the peers into ``bench/.venv`` and runs ``python -m bench``; see
bench/README.md for what each scenario measures.
"""
