"""The GEAK agent loop (Generator, Evaluator, Reflector, Optimizer) and the LLM-free launch-parameter search."""
