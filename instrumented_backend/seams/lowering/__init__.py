"""Lowering: FX nodes into Inductor IR and LoopBodies, and the IR's text."""
