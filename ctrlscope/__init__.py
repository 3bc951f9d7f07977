"""The ``ctrlscope`` command (``ctrlscope.cli``), installed by ``pip install .``."""
