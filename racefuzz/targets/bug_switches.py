"""The testbed's bug switches: their names, and the variable the library reads them from when
it loads. Apart from `builtin` so that the testbed's build (`testbed`) can key its cache by
them without importing the built-in targets, which import the build.
"""

# B1..B8 the seed's behaviours, B9..B17 after public reports, B18..B20 one defect each that many
# ops reach (the preflight probe's own calls, a crash and an error in one shared helper), B21 a
# window only the EP-ABI layer's scheduling points aim at, B22 a kept value a run reads in
# place, B23 memory an application holds past ReleaseSession (only `hard_release` gets there),
# B24 a slot leak only a process serving many schedules reaches (`persistent_pool`): the table
# in testbed/README.md says what each breaks.
BUGS: tuple[str, ...] = tuple(f"B{i}" for i in range(1, 25))
BUGS_ENV = "RACEFUZZ_TESTBED_BUGS"
