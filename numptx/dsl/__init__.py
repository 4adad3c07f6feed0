"""numptx.dsl: ``@ptx_expr`` tracing of Python formulas into Stack PTX / AST PTX programs,
reference evaluation on the CPU and the stub emulator.

Started here; the tracer arrives with the ``@ptx_expr`` issue.
"""
