"""A step replayed alone: the smallest single-thread schedule that makes the same call.

The baseline rule (`judge.baseline`) asks whether a finding's op fails with its session alone,
and repro.py asks the same of a race's other symptoms (`judge.race_symptoms`), so the recipe
lives here, below both, and repro.py embeds it.
"""

from __future__ import annotations

from racefuzz.schedule.model import Op, Schedule, Step, make_step
from racefuzz.schedule.op_table import PREFIX, SPECS, Subject, maker


def alone_schedule(schedule: Schedule, step: int) -> Schedule | None:
    """The smallest single-thread schedule that makes the same call as `step` does.

    The op table's recipe: `register`; then, unless the step is about a library, `create s1`
    on the step's profile and model (its own session, or the backend env-level memory needs);
    the makers of the value it uses (`alloc v1`) and of its peer (`create s2`, `alloc v2`, on
    the peer's profile); then the step itself on those names, mode kept.
    """
    if step >= len(schedule.steps):
        return None  # the worker's teardown: it has no single call to replay alone
    s = schedule.steps[step]
    spec = SPECS[s.op]
    steps = [Step(0, Op.REGISTER)]
    if spec.subject is Subject.LIBRARY:
        if s.op is not Op.REGISTER:
            steps.append(Step(0, s.op, mode=s.mode))  # every library: alone, which is moot
        return Schedule(threads=1, steps=tuple(steps), name="baseline")
    profile, model = schedule.step_profile(step), _model(schedule, step, s.session)
    if profile is None or model is None:
        return None
    names: dict[str, str | None] = {"profile": profile, "model": model, "mode": s.mode}
    count = {Subject.SESSION: 1, Subject.VALUE: 0}  # s1 is the session every recipe creates
    if spec.subject is Subject.SESSION:
        names["session"] = "s1"
    if not spec.makes(Subject.SESSION):
        steps.append(make_step(Op.CREATE, 0, session="s1", profile=profile, model=model))
    if spec.subject is Subject.VALUE:
        count[Subject.VALUE] = 1
        names["value"] = "v1"
        if not spec.makes(Subject.VALUE):
            steps.append(make_step(maker(Subject.VALUE).op, 0, value="v1", profile=profile))
    if spec.peer is not None:
        count[spec.peer] += 1
        peer = names["peer"] = f"{PREFIX[spec.peer]}{count[spec.peer]}"
        on = schedule.made_with(spec.peer, s.peer or "", step)
        if on is None:
            return None
        made = {spec.peer.value: peer, "profile": on, "model": _model(schedule, step, s.peer)}
        steps.append(make_step(maker(spec.peer).op, 0, **made))
    steps.append(make_step(s.op, 0, **names))
    return Schedule(threads=1, steps=tuple(steps), name="baseline")


def _model(schedule: Schedule, step: int, session: str | None) -> str | None:
    """The model `session` was last created with up to `step`, else the smallest model."""
    model = None
    if session is not None:
        for prev in schedule.steps[: step + 1]:
            if SPECS[prev.op].makes(Subject.SESSION) and prev.session == session:
                model = prev.model
    models = sorted(schedule.models())
    return model or (models[0] if models else None)
