"""An example op package: ground removal with a kernel-language hot path.

Built step by step in docs/custom-kernel-op.md. ``kernel`` holds the native kernel,
``reference`` its numpy twin (the spec in code), ``op`` the pipeline stage. Use it from a
pipeline with ``op: ground_removal.op:GroundRemoval`` (see examples/ground_removal.yaml), or
install it with an entry point in the ``cuvil_perception.ops`` group.
"""
