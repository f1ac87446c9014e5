from racefuzz.worker.main import main

main()
