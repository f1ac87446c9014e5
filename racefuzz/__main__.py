from racefuzz.cli import main

main()
