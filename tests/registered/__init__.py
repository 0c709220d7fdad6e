"""Libraries that register kernels into aten with ``torch.library`` at the CPU key, as a
user's Triton library does at the CUDA key: the registration audit's and the registered
mode's planted targets (``tests/test_registered_libraries.py``). Each registers on import;
``LIB`` is its ``Library``, which a test destroys to restore aten."""
