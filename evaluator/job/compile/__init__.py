"""Triton compiles in a job: in forked processes at once (``forked``), ahead of a check's tests by a dry pass of the
job (``dry_pass``), an autotuned kernel's configs before its tuning (``configs_ahead``), said to the caller while
one lasts (``watch``), and kept across isolated jobs in a trusted cache (``trusted_cache``)."""
