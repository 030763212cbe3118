"""The folder put first on PYTHONPATH for harness processes; it holds only `sitecustomize.py`."""
