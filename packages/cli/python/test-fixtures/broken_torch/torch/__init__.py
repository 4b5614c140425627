"""A torch whose import fails (a broken install), for the worker's no-torch error."""
raise ImportError("libtorch_cpu.so: cannot open shared object file (a broken install, on purpose)")
