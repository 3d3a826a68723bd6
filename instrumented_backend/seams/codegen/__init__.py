"""Code generation: kernel lines, the C++ and Triton lowerings of each op, the wrapper code."""
