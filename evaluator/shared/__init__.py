"""What the caller and a job process agree on, with one home each: the job protocol (``protocol``), the names of
test cases (``test_ids``) and the isolation policy (``isolation_policy``). Standard library only, so both sides of
the trust boundary import it (``evaluator/job`` imports nothing else of GEAK)."""
