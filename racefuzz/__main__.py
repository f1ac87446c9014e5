from racefuzz.cli.main import main

main()
