"""Running a campaign's schedules on a Ray cluster (`racefuzz run --ray`).

The campaign (strategies, clusters, corpus, shrink decisions, the output folder) stays one
process, the driver; schedules run on Ray actors, one per job slot on every node, each with its
own zygote pool against its node's EP library, and come back judged. Only `pool` imports Ray,
and only `--ray` imports `pool`.
"""
