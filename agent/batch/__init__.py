"""Batch runs over a suite: `geak run` (the loop on every problem, `run`) and `geak eval` (scoring predictions made
elsewhere, `eval`), spread over evaluation slots (local GPUs, the interpreter, or Ray actors), with the suites'
dataloaders, the metrics and the scaling plot."""
