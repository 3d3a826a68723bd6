"""AOTAutograd and the passes before lowering: the compile entry, decompositions, graph passes,
caches, fake tensors and options."""
