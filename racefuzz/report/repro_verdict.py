"""`verdict`, the part of `repro.py` that judges one replay: did it show the finding again?

Kept as text (the script's template is text) in a module of its own so that the template stays
small. It runs inside repro.py, where FINDING, SCHEDULE, RACE_KINDS and how_it_died are the
script's own.
"""

VERDICT_SOURCE = r'''
def verdict(events, returncode, hung, trace_path, normalise, reports):
    """(reproduced, what this replay did) for one replay; `reports`: (kind, summary) of each
    sanitizer report in its stderr."""
    steps, kind, op = SCHEDULE["steps"], FINDING["kind"], FINDING["op"]
    for found, summary in reports:
        if (found, summary) == (kind, FINDING["message"]):
            return True, f"{found}: {summary}"

    def op_of(i):  # index len(steps) is racefuzz's teardown step
        return steps[i]["op"] if i < len(steps) else "teardown"

    done = {e["step"]: e for e in events if e.get("ev") == "done"}
    started = {e["step"] for e in events if e.get("ev") == "start"}
    in_flight = sorted(started - set(done))
    ended = any(e.get("ev") == "end" for e in events)
    flying = ", ".join(f"step {i} ({op_of(i)})" for i in in_flight) or "no step"
    problems = []
    for i in sorted(done):
        e, step_op = done[i], op_of(i)
        if not e.get("ok"):
            message = e.get("message", "")
            if kind == "error" and step_op == op and normalise(message) == FINDING["message"]:
                return True, f"error at step {i} ({step_op}): {message}"
            problems.append((i, f"error at step {i} ({step_op}): {message}"))
        elif e.get("check") not in (None, "ok"):
            if e["check"] == kind and step_op == op:
                return True, f"{kind} at step {i} ({step_op}): {e.get('detail', '')}"
            problems.append((i, f"{e['check']} at step {i} ({step_op}): {e.get('detail', '')}"))
    # Clustered by the overlap's shape: a failure is this finding again when the last overlap
    # group begun at or before its step had the finding's kinds of call, or fewer of them (as
    # racefuzz's oracle and shrinker judge it); a failure that follows another race is not.
    # A group of one step overlaps nothing. A death between steps follows the last step done.
    wanted = set(FINDING["overlap"].split("+")) if FINDING.get("overlap") else set()

    def ours(i):
        shape, j = set(), 0
        while j < len(steps) and j <= i:
            k, group = j + 1, steps[j].get("group")
            if group is not None:
                while k < len(steps) and steps[k].get("group") == group:
                    k += 1
                if k - j > 1:
                    shape = {RACE_KINDS[x["op"]] for x in steps[j:k]}
            j = k
        return bool(shape) and shape <= wanted

    late = [p for i, p in problems if ours(i)]
    died = hung or not ended or returncode != 0
    at = in_flight[0] if in_flight else max(done, default=0)
    if wanted and (late or (died and ours(at))):
        what = late[0] if late else "hang" if hung else f"crash ({how_it_died(returncode)})"
        return True, f"{what} (after the {FINDING['overlap']} overlap)"
    problems = [p for _, p in problems]
    if hung or not ended or returncode != 0:
        died = "hang" if hung else "crash"
        what = "hang" if hung else f"crash ({how_it_died(returncode)})"
        ops_in_flight = {op_of(i) for i in in_flight}
        same_op = bool(ops_in_flight & set(op.split("+"))) or (op == "none" and not in_flight)
        return kind == died and same_op, f"{what} with {flying} in flight"
    if kind == "misroute" and trace_path and os.path.exists(trace_path):
        with open(trace_path, encoding="utf-8", errors="replace") as f:
            lines = [json.loads(x) for x in f if x.strip().startswith("{")]
        bad = [x for x in lines if x.get("misroute") and x.get("ev") == op]
        if bad:
            return True, f"misroute: {json.dumps(bad[0])}"
    if problems:
        return False, "something else: " + "; ".join(problems)
    return False, f"clean: all {len(steps)} steps ok"
'''.strip()
