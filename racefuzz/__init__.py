"""racefuzz: a concurrency fuzzer and race detector for ONNX Runtime plugin execution providers."""

__version__ = "0.1.0"
