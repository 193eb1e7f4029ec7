"""What the caller and a job process agree on, with one home each: the job protocol (``protocol``), the names of
test cases (``test_ids``), the isolation policy (``isolation_policy``), the sequential timing rule (``sequential``),
the poisons of new allocations (``poison``) and when a value probe can judge (``probe_rules``). Plain data and rules,
so both sides of the trust boundary import it (``evaluator/job`` imports nothing else of the caller's)."""
