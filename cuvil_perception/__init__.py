"""cuvil-perception: real-time perception pipelines with static-shape native kernels."""

__version__ = "0.1.0"
