"""ctrlscope's controller runtime and everything that runs in worker processes.

Nothing under ``controllers`` imports Django: the runtime is a library that would run in any
controller process, and the dashboard only ever sees what it publishes through an Observer.
"""
