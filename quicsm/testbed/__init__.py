"""The testbed: instrumented quic-go server, emulated network (namespaces, tbf, UDP relay), clients.

Modules: ``netns`` (topology, tc), ``cpu`` (CPU quotas), ``procs`` (child processes),
``relay`` (the Go impairment relay), ``chromium`` (the browser client), ``runner`` (one run),
``matrix`` (scenario files), ``accuracy`` (emulator report), ``build`` (patched quic-go binaries).
"""
