"""The launch-configuration search: finds a Triton file's launch knobs, screens configurations through the evaluator
and confirms the fastest; it needs no model and imports nothing of the loop or of batch runs."""
