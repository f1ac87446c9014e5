"""A preflight probe that died after registering the target's libraries is a finding.

`preflight.check` lets such a target through (with a warning): its libraries registered and
showed their devices, then the probe's own calls crashed or hung the EP, which is what racefuzz
is for. Here those calls, as the schedule `preflight.probe_schedule` (cut after the step that was
in flight), run through the executor like any other schedule, and a failing run is handed to the
campaign's one path for new results (`Campaign._record`): on disk at once, classified against
its baseline, shrunk into a bundle, counted in findings.json, exit 1.
"""

from __future__ import annotations

from racefuzz.campaign.loop import Campaign
from racefuzz.execute.runner import Runner
from racefuzz.targets import preflight

# A signal or a hang in the probe may come from a race between its calls and the EP's own
# threads: a few runs before giving up on making it a finding.
TRIES = 3
SOURCE = "preflight"  # the strategy column of the campaign's yield table


def record(campaign: Campaign, runner: Runner) -> None:
    """Run the probe's calls if the last probe of `target` died after registering, and record
    the first failing run in `campaign`; print a line either way."""
    target = runner.target
    died = preflight.died(target)
    if died is None:
        return
    full = preflight.probe_schedule(target)
    schedule = full.with_steps(full.steps[: died["step"] + 1])  # nothing after it ran
    for _ in range(TRIES):
        result = runner.run(schedule)
        if result.findings:
            first = result.findings[0]
            print(
                f"racefuzz: the preflight probe {died['how']} in step {died['step']} "
                f"({died['during']}); as a schedule: {first.kind} on {first.op}, a finding",
                flush=True,
            )
            campaign._record(result, SOURCE)  # the path of every fuzzed schedule's result
            return
    print(
        f"racefuzz: warning: the preflight probe {died['how']} in step {died['step']} "
        f"({died['during']}), but its calls as a schedule did not fail in {TRIES} runs; "
        "fuzzing goes on",
        flush=True,
    )
