"""GEAK's agent, in three layers, each importing only those before it (evaluator ← tuning ← loop ← batch):

- ``tuning``: the launch-configuration search, which needs no model;
- the loop, in this package's own modules: the GEAK loop (Generator, Evaluator, Reflector, Optimizer) over the model
  client, prompts, memory, checkpoints and one-shot retrieval, handing the best candidate to the search;
- ``batch``: batch runs over a suite (`geak run`, `geak eval`), their evaluation slots and dataloaders.
"""
