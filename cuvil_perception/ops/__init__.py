"""Built-in ops, one module per entry point of the group ``cuvil_perception.ops`` in
pyproject.toml: that list is the one list of them (``graph.plugins`` loads it). Importing this
package registers nothing."""
