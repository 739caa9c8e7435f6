"""Built-in ops. Importing this package registers them all."""
